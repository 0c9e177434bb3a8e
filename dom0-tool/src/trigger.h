/* SPDX-License-Identifier: GPL-2.0-only */
// Trigger conditions on one access, as a bus analyzer's: which port, which
// direction, which data (with a don't-care mask), which instruction, which vCPU.
//   port=0x3fd | port=0x3f8-0x3ff     dir=in | dir=out      vcpu=N
//   value=0x20                        every bit must equal
//   value&0x20                        any bit of the mask set
//   value&0x60=0x20                   the masked bits must equal
//   rip=0x401000-0x401fff | rip=0x401234
// Terms are separated by commas and must all hold; each key at most once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace busprof {

struct Record;

struct AccessMatch {
    std::optional<std::pair<uint16_t, uint16_t>> port;
    std::optional<uint8_t> dir; // XEN_BUSPROF_DIR_*
    std::optional<uint16_t> vcpu;
    // value & mask == want, or, with any_bit, value & mask != 0
    std::optional<uint32_t> mask;
    uint32_t want = 0;
    bool any_bit = false;
    std::optional<std::pair<uint64_t, uint64_t>> rip;
    std::string text; // as the user wrote it (canonical spacing)

    bool matches(const Record& r) const;
};

// Throws UserError naming the bad term, with the syntax in its hint.
AccessMatch parse_access_match(const std::string& text);

} // namespace busprof
