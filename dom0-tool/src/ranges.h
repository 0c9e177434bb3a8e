/* SPDX-License-Identifier: GPL-2.0-only */
// Port ranges as users write them: "0x3f8-0x3ff,0x70-0x71"; memory-mapped
// ranges (guest-physical, whole pages): "0xfebf0000-0xfebfffff".
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

// A span of guest-physical memory, [first, last], whole 4 KiB pages.
struct MmioRange {
    uint64_t first;
    uint64_t last;
};

// The highest guest-physical address a span may reach (2^52 - 1, Xen's).
constexpr uint64_t kMmioMaxAddr = (uint64_t{1} << 52) - 1;

// A comma-separated list of FIRST-LAST, each 0x hex (or decimal), FIRST
// page-aligned, LAST + 1 page-aligned (0xfebf0000-0xfebfffff is one 64 KiB
// span), LAST <= kMmioMaxAddr.  Throws UserError naming the bad item, with
// the page-aligned bounds that would cover it in the hint.
std::vector<MmioRange> parse_mmio_ranges(const std::string& text);

} // namespace busprof
