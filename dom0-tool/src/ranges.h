/* SPDX-License-Identifier: GPL-2.0-only */
// Port ranges as users write them: "0x3f8-0x3ff,0x70-0x71".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace busprof {

struct PortRange {
    uint16_t first;
    uint16_t last;
};

// A comma-separated list of FIRST-LAST or single ports, each decimal or 0x
// hex within 0-0xffff, FIRST <= LAST; no spaces, signs or empty items.
// Throws UserError naming the bad item.
std::vector<PortRange> parse_port_ranges(const std::string& text);

} // namespace busprof
