// SPDX-License-Identifier: GPL-2.0-only
// Command-line parsing of the simulated hypervisor (dom0-tool/sim/simxen.h).
// Its port ranges go through the command's parser (ranges_test.cpp).
#include "error.h"
#include "simxen.h"

#include <gtest/gtest.h>

#include <string>

namespace busprof::sim {
namespace {

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
    // what the simulator's own parser used to take: the strict grammar of
    // busprof's ranges applies to the simulated domains too
    EXPECT_THROW(parse_domain_config("1:demo:+0x70"), UserError);
    EXPECT_THROW(parse_domain_config("1:demo: 0x70"), UserError);
    EXPECT_THROW(parse_domain_config("1:demo:0x70,"), UserError);
    EXPECT_THROW(parse_domain_config("1:demo:0x70-+0x71"), UserError);
}

TEST(ParseDomainConfig, VcpuCountOutside1To64IsAUserError) {
    EXPECT_THROW(parse_domain_config("1:demo:0x70:0"), UserError);
    EXPECT_THROW(parse_domain_config("1:demo:0x70:65"), UserError);
}

// A domain id or vCPU count that is not a number is a user's typo like any
// other and must be reported as one (UserError), not escape as
// std::invalid_argument / std::out_of_range from std::stoul.
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
