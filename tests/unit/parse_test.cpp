// Command-line parsing of the simulated hypervisor (dom0-tool/sim/simxen.h).
#include "error.h"
#include "simxen.h"

#include <gtest/gtest.h>

#include <string>

namespace busprof::sim {
namespace {

TEST(ParsePortRanges, ParsesAListOfHexRanges) {
    auto r = parse_port_ranges("0x3f8-0x3ff,0x70-0x71");
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].first, 0x3f8);
    EXPECT_EQ(r[0].last, 0x3ff);
    EXPECT_EQ(r[1].first, 0x70);
    EXPECT_EQ(r[1].last, 0x71);
}

TEST(ParsePortRanges, ASinglePortIsARangeOfOne) {
    auto r = parse_port_ranges("0x80");
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].first, 0x80);
    EXPECT_EQ(r[0].last, 0x80);
}

TEST(ParsePortRanges, AcceptsDecimal) {
    auto r = parse_port_ranges("1016-1023,112");
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].first, 1016);
    EXPECT_EQ(r[0].last, 1023);
    EXPECT_EQ(r[1].first, 112);
}

TEST(ParsePortRanges, CoversTheWholePortSpace) {
    auto r = parse_port_ranges("0-0xffff");
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].first, 0);
    EXPECT_EQ(r[0].last, 0xffff);
}

TEST(ParsePortRanges, KeepsTheOrderGiven) {
    auto r = parse_port_ranges("0x70,0x3f8-0x3ff,0x60");
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0].first, 0x70);
    EXPECT_EQ(r[1].first, 0x3f8);
    EXPECT_EQ(r[2].first, 0x60);
}

TEST(ParsePortRanges, ReversedRangeIsAUserError) {
    EXPECT_THROW(parse_port_ranges("0x3ff-0x3f8"), UserError);
    EXPECT_THROW(parse_port_ranges("0x70-0x71,2-1"), UserError);
}

TEST(ParsePortRanges, PortsAbove0xffffAreAUserError) {
    EXPECT_THROW(parse_port_ranges("0x10000"), UserError);
    EXPECT_THROW(parse_port_ranges("0xfff0-0x10000"), UserError);
    EXPECT_THROW(parse_port_ranges("65536"), UserError);
    EXPECT_THROW(parse_port_ranges("0x70-99999999999999999999999"), UserError);
}

TEST(ParsePortRanges, MalformedTextIsAUserError) {
    for (const char* bad : {"", "abc", "0x3f8-", "-0x3ff", "0x3f8-0x3ff-0x400", "0x3f8,,0x70",
                            "0x3f8 ", "0x3fg", "3f8", "0x70:0x71", "1--1"}) {
        EXPECT_THROW(parse_port_ranges(bad), UserError) << "'" << bad << "'";
    }
}

TEST(ParsePortRanges, TheErrorNamesTheBadItem) {
    try {
        parse_port_ranges("0x70-0x71,0x3ff-0x3f8");
        FAIL();
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("0x3ff-0x3f8"), std::string::npos) << e.what();
    }
}

TEST(ParseDomainConfig, ParsesIdNamePortsAndDefaultVcpus) {
    auto c = parse_domain_config("1:demo:0x3f8-0x3ff,0x70-0x71");
    EXPECT_EQ(c.domid, 1);
    EXPECT_EQ(c.name, "demo");
    ASSERT_EQ(c.ioports.size(), 2u);
    EXPECT_EQ(c.ioports[0].first, 0x3f8);
    EXPECT_EQ(c.ioports[1].last, 0x71);
    EXPECT_EQ(c.vcpus, DomainConfig{}.vcpus);
}

TEST(ParseDomainConfig, ParsesAnExplicitVcpuCount) {
    auto c = parse_domain_config("7:guest7:0x300-0x30f:2");
    EXPECT_EQ(c.domid, 7);
    EXPECT_EQ(c.name, "guest7");
    EXPECT_EQ(c.vcpus, 2u);
    EXPECT_EQ(parse_domain_config("2:x:0x80:64").vcpus, 64u);
    EXPECT_EQ(parse_domain_config("0x10:x:0x80").domid, 0x10);
}

TEST(ParseDomainConfig, WrongNumberOfFieldsIsAUserError) {
    EXPECT_THROW(parse_domain_config("1:demo"), UserError);
    EXPECT_THROW(parse_domain_config("1"), UserError);
    EXPECT_THROW(parse_domain_config(""), UserError);
    EXPECT_THROW(parse_domain_config("1:demo:0x70:2:extra"), UserError);
}

TEST(ParseDomainConfig, Dom0AndReservedIdsAreAUserError) {
    EXPECT_THROW(parse_domain_config("0:dom0:0x70"), UserError);
    EXPECT_THROW(parse_domain_config("32752:x:0x70"), UserError); // 0x7ff0
    EXPECT_EQ(parse_domain_config("32751:x:0x70").domid, 32751);
}

TEST(ParseDomainConfig, BadPortsAreAUserError) {
    EXPECT_THROW(parse_domain_config("1:demo:0x3ff-0x3f8"), UserError);
    EXPECT_THROW(parse_domain_config("1:demo:0x10000"), UserError);
    EXPECT_THROW(parse_domain_config("1:demo:"), UserError);
    EXPECT_THROW(parse_domain_config("1:demo:uart"), UserError);
}

TEST(ParseDomainConfig, VcpuCountOutside1To64IsAUserError) {
    EXPECT_THROW(parse_domain_config("1:demo:0x70:0"), UserError);
    EXPECT_THROW(parse_domain_config("1:demo:0x70:65"), UserError);
}

// A domain id or vCPU count that is not a number is a user's typo like any
// other and must be reported as one (UserError), not escape as
// std::invalid_argument / std::out_of_range from std::stoul.
// DISABLED: fails against dom0-tool/sim/simxen.cpp as it is (stoul's
// exceptions escape, trailing junk such as "1x" is accepted); enable it with
// the fix in parse_domain_config.
TEST(ParseDomainConfig, NonNumericIdOrVcpusIsAUserError) {
    EXPECT_THROW(parse_domain_config("one:demo:0x70"), UserError);
    EXPECT_THROW(parse_domain_config(":demo:0x70"), UserError);
    EXPECT_THROW(parse_domain_config("99999999999999999999999:demo:0x70"), UserError);
    EXPECT_THROW(parse_domain_config("1:demo:0x70:four"), UserError);
    EXPECT_THROW(parse_domain_config("1x:demo:0x70"), UserError);
    EXPECT_THROW(parse_domain_config("1:demo:0x70:2x"), UserError);
}

} // namespace
} // namespace busprof::sim
