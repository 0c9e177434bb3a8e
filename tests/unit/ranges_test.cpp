// SPDX-License-Identifier: GPL-2.0-only
// The port range parser of busprof policy (dom0-tool/src/ranges.h).
#include "error.h"
#include "ranges.h"

#include <gtest/gtest.h>

#include <string>

namespace busprof {
namespace {

TEST(PortRanges, ParsesAListOfHexRanges) {
    auto r = parse_port_ranges("0x3f8-0x3ff,0x70-0x71");
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].first, 0x3f8);
    EXPECT_EQ(r[0].last, 0x3ff);
    EXPECT_EQ(r[1].first, 0x70);
    EXPECT_EQ(r[1].last, 0x71);
}

TEST(PortRanges, ASinglePortIsARangeOfOne) {
    auto r = parse_port_ranges("0x80");
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].first, 0x80);
    EXPECT_EQ(r[0].last, 0x80);
}

TEST(PortRanges, AcceptsDecimalAndUpperCaseHex) {
    auto r = parse_port_ranges("1016-1023,112,0X3F8");
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0].first, 1016);
    EXPECT_EQ(r[0].last, 1023);
    EXPECT_EQ(r[1].first, 112);
    EXPECT_EQ(r[2].first, 0x3f8);
}

TEST(PortRanges, ALeadingZeroIsDecimalNotOctal) {
    EXPECT_EQ(parse_port_ranges("010")[0].first, 10);
    EXPECT_EQ(parse_port_ranges("0")[0].first, 0);
}

TEST(PortRanges, CoversTheWholePortSpace) {
    auto r = parse_port_ranges("0-0xffff");
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].first, 0);
    EXPECT_EQ(r[0].last, 0xffff);
    EXPECT_EQ(parse_port_ranges("65535")[0].first, 0xffff);
}

TEST(PortRanges, KeepsTheOrderGiven) {
    auto r = parse_port_ranges("0x70,0x3f8-0x3ff,0x60");
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0].first, 0x70);
    EXPECT_EQ(r[1].first, 0x3f8);
    EXPECT_EQ(r[2].first, 0x60);
}

TEST(PortRanges, ReversedRangeIsAUserError) {
    EXPECT_THROW(parse_port_ranges("0x3ff-0x3f8"), UserError);
    EXPECT_THROW(parse_port_ranges("0x70-0x71,2-1"), UserError);
}

TEST(PortRanges, PortsAbove0xffffAreAUserError) {
    EXPECT_THROW(parse_port_ranges("0x10000"), UserError);
    EXPECT_THROW(parse_port_ranges("0xfff0-0x10000"), UserError);
    EXPECT_THROW(parse_port_ranges("65536"), UserError);
    EXPECT_THROW(parse_port_ranges("0x70-99999999999999999999999"), UserError);
    EXPECT_THROW(parse_port_ranges("0x00000000000000000000010000"), UserError);
}

TEST(PortRanges, MalformedTextIsAUserError) {
    for (const char* bad : {"", "abc", "0x3f8-", "-0x3ff", "0x3f8-0x3ff-0x400", "0x3f8,,0x70",
                            "0x3f8 ", "0x3fg", "3f8", "0x70:0x71", "1--1", "0x", "0x-0x1"}) {
        EXPECT_THROW(parse_port_ranges(bad), UserError) << "'" << bad << "'";
    }
}

// What strtoul would have let through.
TEST(PortRanges, SpacesSignsAndEmptyItemsAreAUserError) {
    for (const char* bad : {" 0x3f8", "0x3f8 -0x3ff", "+5", "0x70-+0x71", "-5", "0x3f8,", ",0x3f8",
                            ",", "\t0x70", "0x70\n"}) {
        EXPECT_THROW(parse_port_ranges(bad), UserError) << "'" << bad << "'";
    }
}

TEST(PortRanges, TheErrorNamesTheBadItemAndHasAHint) {
    try {
        parse_port_ranges("0x70-0x71,0x3ff-0x3f8");
        FAIL();
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("0x3ff-0x3f8"), std::string::npos) << e.what();
        EXPECT_FALSE(e.hint().empty());
    }
    try {
        parse_port_ranges("0x3f8,+5");
        FAIL();
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("+5"), std::string::npos) << e.what();
        EXPECT_FALSE(e.hint().empty());
    }
}

TEST(MmioRanges, ParsesWholePagesUpToFiftyTwoBits) {
    auto r =
        parse_mmio_ranges("0xfebf0000-0xfebfffff,0x1000-0x1fff,0xffffffffff000-0xfffffffffffff");
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0].first, 0xfebf0000u);
    EXPECT_EQ(r[0].last, 0xfebfffffu);
    EXPECT_EQ(r[1].first, 0x1000u);
    EXPECT_EQ(r[1].last, 0x1fffu);
    EXPECT_EQ(r[2].last, kMmioMaxAddr);
}

TEST(MmioRanges, BoundsThatAreNotWholePagesAreAUserErrorWithTheCoveringPages) {
    for (const char* bad : {"0xfebf0004-0xfebfffff", "0xfebf0000-0xfebf0fff,0x1000-0x1ffe",
                            "0x1000-0x1000", "0x0-0x0"}) {
        EXPECT_THROW(parse_mmio_ranges(bad), UserError) << "'" << bad << "'";
    }
    try {
        parse_mmio_ranges("0xfebf0008-0xfebf100f");
        FAIL();
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("0xfebf0008-0xfebf100f"), std::string::npos);
        EXPECT_NE(e.hint().find("0xfebf0000-0xfebf1fff"), std::string::npos) << e.hint();
    }
}

TEST(MmioRanges, MalformedReversedOrTooHighIsAUserError) {
    for (const char* bad : {"", "0xfebf0000", "0xfebf0000-", "-0xfff", "0x2000-0xfff",
                            "0x10000000000000-0x10000000000fff", "0x1000-0x1fff,", " 0x1000-0x1fff",
                            "0x1000-0x1fffg", "0x1000--0x1fff", "0x1000-0xffffffffffffffffffff"}) {
        EXPECT_THROW(parse_mmio_ranges(bad), UserError) << "'" << bad << "'";
    }
}

} // namespace
} // namespace busprof
