// SPDX-License-Identifier: GPL-2.0-only
// busprof diff: two sessions compared per port and direction, bus time and
// overhead, flagged where the change is larger than the noise.
#include "cmd.h"
#include "compare.h"
#include "db.h"
#include "error.h"
#include "figures.h"
#include "output.h"
#include "table.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>

namespace busprof {

namespace {

// A change is flagged when the Mann-Whitney test of the two sides gives
// p < kAlpha and the median moved by more than kMinChange of A's: with
// many rows a difference of a few ns is significant but of no interest.
// Below kMinSamples values on a side the normal approximation is poor:
// no test.
constexpr double kAlpha = 0.01;
constexpr double kMinChange = 0.05;
constexpr size_t kMinSamples = 10;

struct Spec {
    std::string path;
    int64_t session = -1; // -1: the last one
};

// FILE[:SESSION]: a suffix of digits after the last ':' names the session.
Spec parse_spec(const std::string& s) {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon + 1 == s.size() ||
        s.find_first_not_of("0123456789", colon + 1) != std::string::npos)
        return {s, -1};
    std::string digits = s.substr(colon + 1);
    if (digits.size() > 18 || std::stoll(digits) < 1)
        throw UserError("bad session '" + digits + "' in --db '" + s + "'",
                        "sessions are numbered from 1; 'busprof sessions --db FILE' lists them");
    return {s.substr(0, colon), std::stoll(digits)};
}

using Key = std::pair<int, std::string>; // port, dir

// One side: its session's 'ok' rows, bus time and overhead (rows whose
// clocks agree) per port and direction, each sorted.
struct Side {
    std::string what; // for the user: file, session and domain
    std::map<Key, std::array<std::vector<int64_t>, 2>> values;
};

Side load(const Spec& spec) {
    Db db = open_trace_db(spec.path);
    int64_t session = spec.session;
    if (session < 0) {
        session = db.scalar("SELECT COALESCE(MAX(id), 0) FROM sessions");
        if (!session)
            throw UserError("trace DB " + spec.path + " has no session",
                            "record one with 'busprof daemon' first");
    }
    Side side;
    {
        Stmt s(db.get(), "SELECT domain_name, domid FROM sessions WHERE id = ?");
        s.bind(1, session);
        if (!s.step())
            throw UserError("trace DB " + spec.path + " has no session " + std::to_string(session),
                            "'busprof sessions --db " + spec.path + "' lists them");
        side.what = spec.path + " session " + std::to_string(session) + " (domain " +
                    reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0)) + ", id " +
                    std::to_string(sqlite3_column_int(s.get(), 1)) + ")";
    }
    Stmt s(db.get(), "SELECT port, dir, bus_ns, overhead_ns FROM transaction_times"
                     " WHERE session_id = ? AND status = 'ok' AND bus_ns IS NOT NULL");
    s.bind(1, session);
    while (s.step()) {
        auto& v = side.values[{sqlite3_column_int(s.get(), 0),
                               reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 1))}];
        v[0].push_back(sqlite3_column_int64(s.get(), 2));
        if (sqlite3_column_type(s.get(), 3) != SQLITE_NULL)
            v[1].push_back(sqlite3_column_int64(s.get(), 3));
    }
    for (auto& [k, v] : side.values)
        for (auto& m : v)
            std::sort(m.begin(), m.end());
    return side;
}

// d: a_count ... flag of one metric of one port and direction; in_a,
// in_b: whether each side accessed it at all (a side may have accessed it
// and have no overhead: every row's clocks disagreed).
void compare(const std::vector<int64_t>& a, const std::vector<int64_t>& b, bool in_a, bool in_b,
             Stmt& ins) {
    ins.bind(4, static_cast<int64_t>(a.size())).bind(5, static_cast<int64_t>(b.size()));
    for (int i = 6; i <= 15; i++)
        ins.bind_null(i);
    if (a.empty() || b.empty()) {
        if (!in_a || !in_b)
            ins.bind(15, std::string(in_a ? "only_a" : "only_b"));
        const auto& one = a.empty() ? b : a;
        if (!one.empty()) {
            int at = a.empty() ? 7 : 6; // its p50 and p99 columns
            ins.bind(at, nearest_rank(one, 50)).bind(at + 4, nearest_rank(one, 99));
        }
        return;
    }
    auto ratio = [](int64_t x, int64_t y) -> std::optional<double> {
        if (x == 0)
            return std::nullopt;
        return std::round(static_cast<double>(y) / static_cast<double>(x) * 1000) / 1000;
    };
    int64_t a50 = nearest_rank(a, 50), b50 = nearest_rank(b, 50);
    int64_t a99 = nearest_rank(a, 99), b99 = nearest_rank(b, 99);
    ins.bind(6, a50).bind(7, b50).bind(8, b50 - a50);
    ins.bind(10, a99).bind(11, b99).bind(12, b99 - a99);
    if (auto r = ratio(a50, b50))
        sqlite3_bind_double(ins.get(), 9, *r);
    if (auto r = ratio(a99, b99))
        sqlite3_bind_double(ins.get(), 13, *r);
    if (a.size() < kMinSamples || b.size() < kMinSamples)
        return;
    MannWhitney t = mann_whitney(a, b);
    // Three significant digits: more would claim a precision the
    // approximation does not have.
    char p[32];
    std::snprintf(p, sizeof(p), "%.3g", t.p);
    sqlite3_bind_double(ins.get(), 14, std::strtod(p, nullptr));
    double moved = std::fabs(static_cast<double>(b50 - a50)) /
                   std::max(std::fabs(static_cast<double>(a50)), 1.0);
    if (t.p < kAlpha && moved > kMinChange)
        ins.bind(15, std::string(b50 > a50 ? "slower" : "faster"));
}

size_t print_diff(const Side& a, const Side& b, Format f, std::ostream& out) {
    Db mem = Db::memory();
    mem.exec("CREATE TABLE d (port INTEGER, dir TEXT, metric TEXT, a_count INTEGER,"
             " b_count INTEGER, a_p50_ns INTEGER, b_p50_ns INTEGER, p50_change_ns INTEGER,"
             " p50_ratio REAL, a_p99_ns INTEGER, b_p99_ns INTEGER, p99_change_ns INTEGER,"
             " p99_ratio REAL, p_value REAL, flag TEXT)");
    Stmt ins(mem.get(), "INSERT INTO d VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    std::map<Key, int> keys;
    for (auto* side : {&a, &b})
        for (auto& [k, v] : side->values)
            keys[k]++;
    static const std::array<std::vector<int64_t>, 2> kNone;
    for (auto& [k, n] : keys) {
        auto ia = a.values.find(k), ib = b.values.find(k);
        const auto& va = ia == a.values.end() ? kNone : ia->second;
        const auto& vb = ib == b.values.end() ? kNone : ib->second;
        for (int m = 0; m < 2; m++) {
            ins.bind(1, k.first).bind(2, k.second).bind(3, std::string(m ? "overhead" : "bus"));
            compare(va[m], vb[m], ia != a.values.end(), ib != b.values.end(), ins);
            ins.step();
            ins.reset();
        }
    }
    return print_query(mem.get(),
                       "SELECT printf('0x%04x', port) AS port, dir, metric, a_count, b_count,"
                       " a_p50_ns, b_p50_ns, p50_change_ns, p50_ratio, a_p99_ns, b_p99_ns,"
                       " p99_change_ns, p99_ratio, p_value, flag FROM d"
                       " ORDER BY d.port, d.dir, d.metric",
                       f, out);
}

} // namespace

void setup_diff(CLI::App& app, Globals& g, Runner& run) {
    (void)g; // two DBs of its own, not the common --db
    auto* c = app.add_subcommand(
        "diff", "compare two sessions per port: bus time and overhead, and which changed");
    auto specs = std::make_shared<std::vector<std::string>>();
    auto format = std::make_shared<std::string>("table");
    c->add_option("--db", *specs, "FILE[:SESSION], twice: A, then B (default: the last session)")
        ->required()
        ->allow_extra_args(false)
        ->check(non_empty("--db"));
    c->add_option("--format", *format, "table, csv or json")
        ->check(CLI::IsMember({"table", "csv", "json"}));
    c->callback([&run, specs, format] {
        if (specs->size() != 2)
            throw UserError("diff compares two sessions: give --db twice",
                            "busprof diff --db A.db[:SESSION] --db B.db[:SESSION]");
        auto sa = std::make_shared<Spec>(parse_spec((*specs)[0]));
        auto sb = std::make_shared<Spec>(parse_spec((*specs)[1]));
        run = [sa, sb, format] {
            Side a = load(*sa), b = load(*sb);
            std::cerr << "busprof: A: " << a.what << "\nbusprof: B: " << b.what << "\n";
            Output out("-");
            const bool any = print_diff(a, b, parse_format(*format), out.stream());
            out.commit();
            if (!any) {
                std::cerr << "busprof: no 'ok' transactions in either session\n";
                return EXIT_SUCCESS;
            }
            std::cerr << "busprof: flag: a two-sided Mann-Whitney U test of the two sides gives"
                         " p < "
                      << kAlpha << " and the median moved by more than " << kMinChange * 100
                      << " %; no test below " << kMinSamples << " values a side\n";
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
