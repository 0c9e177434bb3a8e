// SPDX-License-Identifier: GPL-2.0-only
// Fuzz target: the port range parser (dom0-tool/src/ranges.cpp), which reads what
// users type for --ports, --allow and the simulator's domains.
//
// Checked against a second, independent reading of the grammar of busprof(1):
//   LIST  := ITEM (',' ITEM)*      ITEM := PORT | PORT '-' PORT
//   PORT  := [0-9]+ | '0' [xX] [0-9a-fA-F]+   (value <= 0xffff, FIRST <= LAST)
// The parser must accept exactly what the grammar accepts, give the same
// ranges, throw nothing but UserError, and read back its own rendering.
#include "error.h"
#include "ranges.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using busprof::PortRange;

namespace {

[[noreturn]] void fail(const std::string& text, const char* what) {
    std::fprintf(stderr, "fuzz_ranges: %s for input '%s'\n", what, text.c_str());
    std::abort();
}

std::optional<unsigned> ref_port(const std::string& s) {
    bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    std::string digits = hex ? s.substr(2) : s;
    if (digits.empty())
        return std::nullopt;
    unsigned long v = 0;
    for (char c : digits) {
        unsigned d;
        if (c >= '0' && c <= '9')
            d = static_cast<unsigned>(c - '0');
        else if (hex && c >= 'a' && c <= 'f')
            d = static_cast<unsigned>(c - 'a' + 10);
        else if (hex && c >= 'A' && c <= 'F')
            d = static_cast<unsigned>(c - 'A' + 10);
        else
            return std::nullopt;
        v = v * (hex ? 16 : 10) + d;
        if (v > 0xffff)
            return std::nullopt;
    }
    return static_cast<unsigned>(v);
}

std::optional<std::vector<PortRange>> reference(const std::string& text) {
    std::vector<PortRange> out;
    size_t start = 0;
    for (;;) {
        size_t end = text.find(',', start);
        std::string item = text.substr(start, end == std::string::npos ? end : end - start);
        size_t dash = item.find('-');
        auto first = ref_port(item.substr(0, dash));
        auto last = dash == std::string::npos ? first : ref_port(item.substr(dash + 1));
        if (!first || !last || *first > *last)
            return std::nullopt;
        out.push_back({static_cast<uint16_t>(*first), static_cast<uint16_t>(*last)});
        if (end == std::string::npos)
            return out;
        start = end + 1;
    }
}

bool same(const std::vector<PortRange>& a, const std::vector<PortRange>& b) {
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); i++)
        if (a[i].first != b[i].first || a[i].last != b[i].last)
            return false;
    return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto want = reference(text);
    std::vector<PortRange> got;
    bool ok = true;
    try {
        got = busprof::parse_port_ranges(text);
    } catch (const busprof::UserError& e) {
        ok = false;
        if (std::string(e.what()).empty() || e.hint().empty())
            fail(text, "a UserError without message or hint");
    } // anything else escapes and is a crash
    if (ok != want.has_value())
        fail(text, ok ? "accepted what the grammar refuses" : "refused what the grammar accepts");
    if (!ok)
        return 0;
    if (!same(got, *want))
        fail(text, "ranges differ from the grammar's");
    std::string again;
    for (const auto& r : got) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%s0x%x-0x%x", again.empty() ? "" : ",", r.first, r.last);
        again += buf;
    }
    if (!same(busprof::parse_port_ranges(again), got))
        fail(text, "does not read back its own rendering");
    return 0;
}
