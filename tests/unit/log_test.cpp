// SPDX-License-Identifier: GPL-2.0-only
// The daemon's log: each level's prefix, and what --quiet and -v let through.
#include "log.h"

#include <gtest/gtest.h>

namespace busprof {
namespace {

// What one line at each level prints with the most detailed level `most`.
std::string logged_at(LogLevel most) {
    set_log_level(most);
    ::testing::internal::CaptureStderr();
    log(LogLevel::error, "lost %d records", 3);
    log(LogLevel::warning, "stays at nice %d", 0);
    log(LogLevel::info, "profiling domain %s", "g");
    log(LogLevel::debug, "xen: %s", "chatter");
    std::string out = ::testing::internal::GetCapturedStderr();
    set_log_level(LogLevel::info);
    return out;
}

TEST(Log, EachLevelHasItsPrefixAndInfoIsTheDefault) {
    EXPECT_EQ(logged_at(LogLevel::info), "busprof: error: lost 3 records\n"
                                         "busprof: warning: stays at nice 0\n"
                                         "busprof: profiling domain g\n");
}

TEST(Log, QuietKeepsTheErrorsOnly) {
    EXPECT_EQ(logged_at(LogLevel::error), "busprof: error: lost 3 records\n");
    set_log_level(LogLevel::error);
    EXPECT_TRUE(log_enabled(LogLevel::error));
    EXPECT_FALSE(log_enabled(LogLevel::warning));
    set_log_level(LogLevel::info);
}

TEST(Log, VerboseAddsTheDebugLines) {
    EXPECT_EQ(logged_at(LogLevel::debug), "busprof: error: lost 3 records\n"
                                          "busprof: warning: stays at nice 0\n"
                                          "busprof: profiling domain g\n"
                                          "busprof: xen: chatter\n");
}

// A line longer than the buffer is cut, never overrun, and still ends.
TEST(Log, ALongLineIsCutAndEnds) {
    ::testing::internal::CaptureStderr();
    log(LogLevel::info, "%s", std::string(5000, 'x').c_str());
    std::string out = ::testing::internal::GetCapturedStderr();
    EXPECT_LT(out.size(), 2100u);
    EXPECT_EQ(out.back(), '\n');
    EXPECT_EQ(out.rfind("busprof: x", 0), 0u);
}

} // namespace
} // namespace busprof
