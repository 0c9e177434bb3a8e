// SPDX-License-Identifier: GPL-2.0-only
// The error idiom: Errno's message, Result's value or error, and the
// UserError a refused call becomes.
#include "error.h"

#include <gtest/gtest.h>

namespace busprof {
namespace {

TEST(Errno, NamesTheErrnoAsGlibcDoes) {
    EXPECT_EQ(Errno(EPERM).message(), "Operation not permitted (EPERM)");
    EXPECT_EQ(Errno(EOPNOTSUPP).message(), "Operation not supported (EOPNOTSUPP)");
    EXPECT_EQ(Errno(EHWPOISON).message(), "Memory page has hardware error (EHWPOISON)");
    // A value with no name still says what it is.
    EXPECT_EQ(Errno(4000).message(), "Unknown error 4000");
}

TEST(Result, HoldsTheValueOrTheErrno) {
    Result<int> ok = 7;
    ASSERT_TRUE(ok.ok());
    EXPECT_EQ(ok.value(), 7);
    Result<int> bad = Errno(ENOENT);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error(), ENOENT);
    EXPECT_EQ(std::move(ok).value_or_throw("unused"), 7);
}

TEST(Result, ARefusalBecomesAUserErrorWithItsHint) {
    Result<int> bad = Errno(EBUSY);
    try {
        (void)std::move(bad).value_or_throw("cannot attach to domain g", "one daemon per domain");
        FAIL() << "no throw";
    } catch (const UserError& e) {
        EXPECT_STREQ(e.what(), "cannot attach to domain g: Device or resource busy (EBUSY)");
        EXPECT_EQ(e.hint(), "one daemon per domain");
    }
}

TEST(Status, FollowsTheHypercallConvention) {
    EXPECT_TRUE(status_of(0).ok());
    EXPECT_TRUE(status_of(3).ok()); // a positive return is a success
    Status st = status_of(-ENXIO);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().value(), ENXIO);
}

} // namespace
} // namespace busprof
