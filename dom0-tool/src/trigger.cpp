// SPDX-License-Identifier: GPL-2.0-only
#include "trigger.h"

#include "error.h"
#include "record.h"

#include <cerrno>
#include <cstdlib>

namespace busprof {

namespace {

const char* const kHint = "write terms key=value separated by commas, all of which must hold: "
                          "port=0x3fd or port=0x3f8-0x3ff, dir=in|out, vcpu=N, value=V, "
                          "value&MASK (any bit set), value&MASK=V, rip=A or rip=A-B";

// Decimal or 0x hex, no sign or blanks, at most max.
uint64_t number(const std::string& s, const std::string& term, uint64_t max) {
    bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    size_t digits = hex ? 2 : 0;
    if (s.size() == digits || s.find_first_not_of(hex ? "0123456789abcdefABCDEF" : "0123456789",
                                                  digits) != std::string::npos)
        throw UserError("malformed number '" + s + "' in trigger term '" + term + "'", kHint);
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str() + digits, nullptr, hex ? 16 : 10);
    if (errno == ERANGE || v > max)
        throw UserError("number " + s + " in trigger term '" + term + "' is too large", kHint);
    return v;
}

std::pair<uint64_t, uint64_t> range(const std::string& s, const std::string& term, uint64_t max) {
    auto dash = s.find('-');
    uint64_t a = number(s.substr(0, dash), term, max);
    uint64_t b = dash == std::string::npos ? a : number(s.substr(dash + 1), term, max);
    if (a > b)
        throw UserError("reversed range in trigger term '" + term + "'",
                        "the first value must not be above the last");
    return {a, b};
}

} // namespace

AccessMatch parse_access_match(const std::string& text) {
    if (text.empty())
        throw UserError("empty trigger condition", kHint);
    AccessMatch m;
    bool value_seen = false;
    size_t pos = 0;
    for (;;) {
        size_t comma = text.find(',', pos);
        std::string term = text.substr(pos, comma == std::string::npos ? comma : comma - pos);
        if (term.empty())
            throw UserError("empty term in trigger condition '" + text + "'", kHint);
        auto eq = term.find('=');
        std::string key = term.substr(0, eq),
                    val = eq == std::string::npos ? "" : term.substr(eq + 1);
        auto once = [&](bool seen) {
            if (seen)
                throw UserError("trigger condition '" + text + "' names " + key + " twice",
                                "each key at most once; all terms must hold");
        };
        if (key.rfind("value", 0) == 0) {
            once(value_seen);
            value_seen = true;
            if (key == "value") {
                if (eq == std::string::npos)
                    throw UserError("trigger term '" + term + "' has no value", kHint);
                m.mask = 0xffffffffu;
                m.want = static_cast<uint32_t>(number(val, term, 0xffffffffu));
            } else if (key.size() > 6 && key[5] == '&') {
                m.mask = static_cast<uint32_t>(number(key.substr(6), term, 0xffffffffu));
                if (!*m.mask)
                    throw UserError("trigger term '" + term + "' has a mask of 0",
                                    "a mask selects the bits that matter: 0 selects none");
                if (eq == std::string::npos) {
                    m.any_bit = true;
                } else {
                    m.want = static_cast<uint32_t>(number(val, term, 0xffffffffu));
                    if (m.want & ~*m.mask)
                        throw UserError("trigger term '" + term + "' wants bits outside its mask",
                                        "value&MASK=V compares value & MASK with V: V must "
                                        "lie within MASK, or it never matches");
                }
            } else {
                throw UserError("unknown trigger term '" + term + "'", kHint);
            }
        } else if (eq == std::string::npos) {
            throw UserError("trigger term '" + term + "' has no value", kHint);
        } else if (key == "port") {
            once(m.port.has_value());
            auto r = range(val, term, 0xffff);
            m.port = {static_cast<uint16_t>(r.first), static_cast<uint16_t>(r.second)};
        } else if (key == "dir") {
            once(m.dir.has_value());
            if (val != "in" && val != "out")
                throw UserError("trigger term '" + term + "': dir is in or out", kHint);
            m.dir = val == "in" ? XEN_BUSPROF_DIR_IN : XEN_BUSPROF_DIR_OUT;
        } else if (key == "vcpu") {
            once(m.vcpu.has_value());
            m.vcpu = static_cast<uint16_t>(number(val, term, XEN_BUSPROF_MAX_VCPUS - 1));
        } else if (key == "rip") {
            once(m.rip.has_value());
            m.rip = range(val, term, UINT64_MAX);
        } else {
            throw UserError("unknown trigger term '" + term + "'", kHint);
        }
        if (comma == std::string::npos)
            break;
        pos = comma + 1;
    }
    m.text = text;
    return m;
}

bool AccessMatch::matches(const Record& r) const {
    if (port && (r.port < port->first || r.port > port->second))
        return false;
    if (dir && r.dir != *dir)
        return false;
    if (vcpu && r.vcpu != *vcpu)
        return false;
    if (rip && (r.rip < rip->first || r.rip > rip->second))
        return false;
    if (mask && (any_bit ? (r.value & *mask) == 0 : (r.value & *mask) != want))
        return false;
    return true;
}

} // namespace busprof
