// SPDX-License-Identifier: GPL-2.0-only
// Checks of option values and the options shared by the subcommands.
#include "cmd.h"
#include "error.h"
#include "ranges.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace busprof {

namespace {

std::string in_quotes(const std::string& s) {
    return "'" + s + "'";
}

} // namespace

// CLI11 converts with strtoull(s, 0), which wraps "-1" to 2^64-1, reads
// "010" as octal and skips leading blanks: the value is checked here and
// handed on in decimal.
CLI::Validator integer_in(uint64_t lo, uint64_t hi, const std::string& unit) {
    auto desc = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
                (unit.empty() ? "" : " (" + unit + ")");
    return CLI::Validator(
        [lo, hi, desc](std::string& s) -> std::string {
            bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
            const char* digits = hex ? "0123456789abcdefABCDEF" : "0123456789";
            if (s.size() == (hex ? 2u : 0u) ||
                s.find_first_not_of(digits, hex ? 2 : 0) != std::string::npos)
                return in_quotes(s) + " is not " + desc;
            errno = 0;
            unsigned long long v = std::strtoull(s.c_str() + (hex ? 2 : 0), nullptr, hex ? 16 : 10);
            if (errno == ERANGE || v < lo || v > hi)
                return in_quotes(s) + " is not " + desc;
            s = std::to_string(v);
            return {};
        },
        "INTEGER");
}

// The same for a value that may be negative: decimal only.
CLI::Validator signed_in(int64_t lo, int64_t hi) {
    auto desc = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    return CLI::Validator(
        [lo, hi, desc](std::string& s) -> std::string {
            const size_t at = !s.empty() && s[0] == '-' ? 1 : 0;
            if (s.size() == at || s.size() > at + 18 ||
                s.find_first_not_of("0123456789", at) != std::string::npos)
                return in_quotes(s) + " is not " + desc;
            const long long v = std::strtoll(s.c_str(), nullptr, 10);
            if (v < lo || v > hi)
                return in_quotes(s) + " is not " + desc;
            s = std::to_string(v);
            return {};
        },
        "INTEGER");
}

CLI::Validator seconds_in(double lo, double hi) {
    char desc[96];
    std::snprintf(desc, sizeof(desc), "a number of seconds from %g to %g", lo, hi);
    return CLI::Validator(
        [lo, hi, d = std::string(desc)](std::string& s) -> std::string {
            char* end = nullptr;
            errno = 0;
            // strtod would also take blanks, hex, "inf" and "nan".
            double v = s.empty() || s.find_first_not_of("0123456789.eE+-") != std::string::npos
                           ? NAN
                           : std::strtod(s.c_str(), &end);
            if (!end || *end || errno == ERANGE || !std::isfinite(v) || v < lo || v > hi)
                return in_quotes(s) + " is not " + d;
            return {};
        },
        "SECONDS");
}

CLI::Validator domain_spec() {
    return CLI::Validator(
        [](std::string& s) -> std::string {
            if (s.empty())
                return "empty domain";
            const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
            if (s[0] == '-' || hex || s.find_first_not_of("0123456789") == std::string::npos) {
                std::string err = integer_in(0, 0x7fef)(s);
                return err.empty() ? err : err + " nor a domain name";
            }
            return {};
        },
        "DOMAIN");
}

CLI::Validator non_empty(const std::string& what) {
    return CLI::Validator(
        [what](std::string& s) -> std::string { return s.empty() ? "empty " + what : ""; }, "");
}

void add_space_option(CLI::App* c, std::string& space) {
    c->add_option("--space", space,
                  "port (port transactions) or mmio (memory-mapped registers, per address"
                  " and width)")
        ->capture_default_str()
        ->check(CLI::IsMember({"port", "mmio"}));
}

void add_space_options(CLI::App* c, SpaceOptions& o) {
    add_space_option(c, o.space);
    c->add_option("--mmio", o.mmio,
                  "only memory-mapped accesses in these spans: FIRST-LAST, whole pages,"
                  " comma-separated (implies --space mmio)");
}

void space_selected(CLI::App* c, const SpaceOptions& o, Selection& sel) {
    const bool mmio = o.space == "mmio" || c->count("--mmio");
    if (c->count("--mmio") && c->count("--space") && o.space == "port")
        throw UserError("--mmio selects memory-mapped accesses, --space port the ports",
                        "drop --space port, or --mmio to see the ports");
    if (mmio && c->get_option_no_throw("--port") && c->count("--port"))
        throw UserError("--port selects port transactions, not memory-mapped ones",
                        "use --mmio FIRST-LAST for memory-mapped registers");
    sel.space = mmio ? Space::mmio : Space::port;
    if (c->count("--mmio"))
        sel.mmio = parse_mmio_ranges(o.mmio);
}

} // namespace busprof
