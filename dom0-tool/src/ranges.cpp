// SPDX-License-Identifier: GPL-2.0-only
#include "ranges.h"

#include "error.h"

#include <cstdio>

namespace busprof {

namespace {

const char* const kRangeHint = "write ranges as FIRST-LAST or PORT, decimal or 0x hex, "
                               "separated by commas: 0x3f8-0x3ff,0x70-0x71";

// Strict on purpose: strtoul would also take " 0x3f8", "+5" and octal "010",
// and a policy is the wrong place to guess what a typo meant.  Decimal or
// 0x hex up to max; what: "port" or "address"; above: the error beyond max.
uint64_t parse_number(const std::string& s, const std::string& item, uint64_t max, const char* what,
                      const char* hint, const UserError& above) {
    bool hex = s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    size_t i = hex ? 2 : 0;
    if (s.size() == i)
        throw UserError(std::string("malformed ") + what + " range '" + item + "'", hint);
    uint64_t v = 0;
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
            throw UserError(std::string("malformed ") + what + " '" + s + "' in '" + item + "'",
                            hint);
        v = v * (hex ? 16 : 10) + static_cast<uint64_t>(d);
        if (v > max)
            throw above;
    }
    return v;
}

unsigned parse_port(const std::string& s, const std::string& item) {
    return static_cast<unsigned>(
        parse_number(s, item, 0xffff, "port", kRangeHint,
                     UserError("port " + s + " is above 0xffff", "x86 I/O ports are 0x0-0xffff")));
}

const char* const kMmioHint = "write memory-mapped ranges as FIRST-LAST of whole 4 KiB pages, "
                              "0x hex, separated by commas: 0xfebf0000-0xfebfffff";

uint64_t parse_addr(const std::string& s, const std::string& item) {
    return parse_number(s, item, kMmioMaxAddr, "address", kMmioHint,
                        UserError("address " + s + " is above 0xfffffffffffff",
                                  "guest-physical addresses have at most 52 bits"));
}

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

} // namespace

std::vector<MmioRange> parse_mmio_ranges(const std::string& text) {
    constexpr uint64_t kPage = 4096;
    if (text.empty())
        throw UserError("empty memory-mapped range list", kMmioHint);
    std::vector<MmioRange> out;
    size_t pos = 0;
    for (;;) {
        size_t comma = text.find(',', pos);
        std::string item = text.substr(pos, comma == std::string::npos ? comma : comma - pos);
        if (item.empty())
            throw UserError("empty item in memory-mapped range list '" + text + "'", kMmioHint);
        size_t dash = item.find('-');
        if (dash == std::string::npos)
            throw UserError("memory-mapped range '" + item + "' has no last address", kMmioHint);
        uint64_t first = parse_addr(item.substr(0, dash), item);
        uint64_t last = parse_addr(item.substr(dash + 1), item);
        if (first > last)
            throw UserError("reversed memory-mapped range '" + item + "'",
                            "the first address must not be above the last");
        if (first % kPage || (last + 1) % kPage)
            throw UserError("memory-mapped range '" + item + "' is not whole 4 KiB pages",
                            "the pages that hold it are " + hex(first / kPage * kPage) + "-" +
                                hex(last / kPage * kPage + kPage - 1));
        out.push_back({first, last});
        if (comma == std::string::npos)
            break;
        pos = comma + 1;
    }
    return out;
}

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
