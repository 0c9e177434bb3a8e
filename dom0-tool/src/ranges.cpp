// SPDX-License-Identifier: GPL-2.0-only
#include "ranges.h"

#include "error.h"

namespace busprof {

namespace {

const char* const kRangeHint = "write ranges as FIRST-LAST or PORT, decimal or 0x hex, "
                               "separated by commas: 0x3f8-0x3ff,0x70-0x71";

// Strict on purpose: strtoul would also take " 0x3f8", "+5" and octal "010",
// and a policy is the wrong place to guess what a typo meant.
unsigned parse_port(const std::string& s, const std::string& item) {
    bool hex = s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    size_t i = hex ? 2 : 0;
    if (s.size() == i)
        throw UserError("malformed port range '" + item + "'", kRangeHint);
    unsigned long v = 0;
    for (; i < s.size(); i++) {
        char c = s[i];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (hex && c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (hex && c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            throw UserError("malformed port '" + s + "' in '" + item + "'", kRangeHint);
        v = v * (hex ? 16 : 10) + static_cast<unsigned long>(d);
        if (v > 0xffff)
            throw UserError("port " + s + " is above 0xffff", "x86 I/O ports are 0x0-0xffff");
    }
    return static_cast<unsigned>(v);
}

} // namespace

std::vector<PortRange> parse_port_ranges(const std::string& text) {
    if (text.empty())
        throw UserError("empty port range list", kRangeHint);
    std::vector<PortRange> out;
    size_t pos = 0;
    for (;;) {
        size_t comma = text.find(',', pos);
        std::string item = text.substr(pos, comma == std::string::npos ? comma : comma - pos);
        if (item.empty())
            throw UserError("empty item in port range list '" + text + "'", kRangeHint);
        size_t dash = item.find('-');
        unsigned first = parse_port(item.substr(0, dash), item);
        unsigned last = dash == std::string::npos ? first : parse_port(item.substr(dash + 1), item);
        if (first > last)
            throw UserError("reversed port range '" + item + "'",
                            "the first port must not be above the last");
        out.push_back({static_cast<uint16_t>(first), static_cast<uint16_t>(last)});
        if (comma == std::string::npos)
            break;
        pos = comma + 1;
    }
    return out;
}

} // namespace busprof
