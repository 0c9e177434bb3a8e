// SPDX-License-Identifier: GPL-2.0-only
// busprof diff: two sides, each one or several sessions, compared per port
// and direction, bus time and overhead; a change is flagged where it is
// significant, larger than a threshold and larger than the sessions' spread.
#include "cmd.h"
#include "compare.h"
#include "db.h"
#include "error.h"
#include "figures.h"
#include "output.h"
#include "table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <tuple>

namespace busprof {

namespace {

// Below kMinSamples values on a side the normal approximations of the
// test and of the interval are poor: no test.
constexpr size_t kMinSamples = 10;

// What makes a change: the defaults of the options, documented in busprof(1).
struct Rule {
    double confidence = 99; // % of the shift's interval and of the sessions' t bound
    double min_change = 15; // % of A's p50
    int64_t min_change_ns = 10;
};

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

// port (or address), width (memory-mapped registers; 0 for ports), dir
using Key = std::tuple<int64_t, int, std::string>;
using Values = std::array<std::vector<int64_t>, 2>; // bus time, overhead

// One side: the 'ok' rows of its sessions pooled, bus time and overhead
// (rows whose clocks agree) per port and direction, each sorted; and per
// port, direction and metric the p50 of each session that has enough
// values for one, the spread a repeat of the run gives.
struct Side {
    std::vector<std::string> what; // for the user: file, session and domain of each
    std::map<Key, Values> values;
    std::map<Key, std::array<std::vector<double>, 2>> session_p50s;
};

void load(const Spec& spec, const Selection& sel, Side& side) {
    Db db = open_trace_db(spec.path);
    int64_t session = spec.session;
    if (session < 0) {
        session = db.scalar("SELECT COALESCE(MAX(id), 0) FROM sessions");
        if (!session)
            throw UserError("trace DB " + spec.path + " has no session",
                            "record one with 'busprof daemon' first");
    }
    {
        Stmt s(db.get(), "SELECT domain_name, domid FROM sessions WHERE id = ?");
        s.bind(1, session);
        if (!s.step())
            throw UserError("trace DB " + spec.path + " has no session " + std::to_string(session),
                            "'busprof sessions --db " + spec.path + "' lists them");
        side.what.push_back(spec.path + " session " + std::to_string(session) + " (domain " +
                            reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0)) +
                            ", id " + std::to_string(sqlite3_column_int(s.get(), 1)) + ")");
    }
    std::map<Key, Values> mine;
    const bool mmio = sel.space == Space::mmio;
    Stmt s(db.get(), std::string("SELECT ") + (mmio ? "addr, size" : "port, 0") +
                         ", dir, bus_ns, overhead_ns FROM " + sel.times_view() +
                         " WHERE session_id = ? AND status = 'ok' AND bus_ns IS NOT NULL" +
                         sel.on_rows());
    s.bind(1, session);
    while (s.step()) {
        auto& v = mine[{sqlite3_column_int64(s.get(), 0), sqlite3_column_int(s.get(), 1),
                        reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 2))}];
        v[0].push_back(sqlite3_column_int64(s.get(), 3));
        if (sqlite3_column_type(s.get(), 4) != SQLITE_NULL)
            v[1].push_back(sqlite3_column_int64(s.get(), 4));
    }
    for (auto& [k, v] : mine) {
        auto& pooled = side.values[k];
        for (int m = 0; m < 2; m++) {
            std::sort(v[m].begin(), v[m].end());
            if (v[m].size() >= kMinSamples)
                side.session_p50s[k][m].push_back(static_cast<double>(nearest_rank(v[m], 50)));
            pooled[m].insert(pooled[m].end(), v[m].begin(), v[m].end());
            std::inplace_merge(pooled[m].begin(), pooled[m].end() - std::ssize(v[m]),
                               pooled[m].end());
            std::vector<int64_t>().swap(v[m]);
        }
    }
}

Side load(const std::vector<Spec>& specs, const Selection& sel) {
    Side side;
    for (const auto& spec : specs)
        load(spec, sel, side);
    return side;
}

// The change a repeat of the run could give: Student's t bound, at the
// rule's confidence, of the difference between the sides' mean session
// p50s, from the spread of the p50s about their side's mean.  None when
// there is no spread to measure (one session with enough values a side).
std::optional<int64_t> session_noise(const std::vector<double>& a, const std::vector<double>& b,
                                     double confidence) {
    if (a.empty() || b.empty() || a.size() + b.size() < 3)
        return std::nullopt;
    double ss = 0;
    for (const auto* side : {&a, &b}) {
        double mean = 0;
        for (double v : *side)
            mean += v / static_cast<double>(side->size());
        for (double v : *side)
            ss += (v - mean) * (v - mean);
    }
    int df = static_cast<int>(a.size() + b.size()) - 2;
    double se = std::sqrt(
        ss / df * (1.0 / static_cast<double>(a.size()) + 1.0 / static_cast<double>(b.size())));
    return static_cast<int64_t>(std::ceil(student_t_quantile(confidence / 100, df) * se));
}

// The columns of one row (a metric of a port and direction); in_a, in_b:
// whether each side accessed it at all (a side may have accessed it and
// have no overhead: every row's clocks disagreed).  several: some side has
// more than one session, so the change must also exceed their spread.
enum Col {
    kACount = 5,
    kBCount,
    kAP50,
    kBP50,
    kP50Change,
    kP50Ratio,
    kAP99,
    kBP99,
    kP99Change,
    kP99Ratio,
    kShift,
    kShiftLow,
    kShiftHigh,
    kThreshold,
    kNoise,
    kPValue,
    kFlag
};

void compare(const std::vector<int64_t>& a, const std::vector<int64_t>& b, bool in_a, bool in_b,
             std::optional<int64_t> noise, bool several, const Rule& rule, Stmt& ins) {
    ins.bind(kACount, static_cast<int64_t>(a.size())).bind(kBCount, static_cast<int64_t>(b.size()));
    for (int i = kAP50; i <= kFlag; i++)
        ins.bind_null(i);
    if (a.empty() || b.empty()) {
        if (!in_a || !in_b)
            ins.bind(kFlag, std::string(in_a ? "only_a" : "only_b"));
        const auto& one = a.empty() ? b : a;
        if (!one.empty()) {
            int at = a.empty() ? kBP50 : kAP50;
            ins.bind(at, nearest_rank(one, 50)).bind(at + kAP99 - kAP50, nearest_rank(one, 99));
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
    ins.bind(kAP50, a50).bind(kBP50, b50).bind(kP50Change, b50 - a50);
    ins.bind(kAP99, a99).bind(kBP99, b99).bind(kP99Change, b99 - a99);
    if (auto r = ratio(a50, b50))
        sqlite3_bind_double(ins.get(), kP50Ratio, *r);
    if (auto r = ratio(a99, b99))
        sqlite3_bind_double(ins.get(), kP99Ratio, *r);
    if (a.size() < kMinSamples || b.size() < kMinSamples)
        return;
    Shift shift = hodges_lehmann(a, b, rule.confidence / 100);
    sqlite3_bind_double(ins.get(), kShift, shift.estimate);
    if (shift.low)
        ins.bind(kShiftLow, *shift.low).bind(kShiftHigh, *shift.high);
    auto threshold = std::max(rule.min_change_ns,
                              static_cast<int64_t>(std::ceil(rule.min_change / 100 *
                                                             std::fabs(static_cast<double>(a50)))));
    ins.bind(kThreshold, threshold);
    if (noise)
        ins.bind(kNoise, *noise);
    // Three significant digits: more would claim a precision the
    // approximation does not have.
    char p[32];
    std::snprintf(p, sizeof(p), "%.3g", mann_whitney(a, b).p);
    sqlite3_bind_double(ins.get(), kPValue, std::strtod(p, nullptr));
    const bool significant = shift.low && (*shift.low > 0 || *shift.high < 0);
    const double size = std::fabs(shift.estimate);
    if (significant && size > static_cast<double>(threshold) &&
        (!several || (noise && size > static_cast<double>(*noise))))
        ins.bind(kFlag, std::string(shift.estimate > 0 ? "slower" : "faster"));
}

size_t print_diff(const Side& a, const Side& b, const Rule& rule, Space space, Format f,
                  std::ostream& out) {
    Db mem = Db::memory();
    mem.exec("CREATE TABLE d (port INTEGER, size INTEGER, dir TEXT, metric TEXT, a_count INTEGER,"
             " b_count INTEGER, a_p50_ns INTEGER, b_p50_ns INTEGER, p50_change_ns INTEGER,"
             " p50_ratio REAL, a_p99_ns INTEGER, b_p99_ns INTEGER, p99_change_ns INTEGER,"
             " p99_ratio REAL, shift_ns REAL, shift_low_ns INTEGER, shift_high_ns INTEGER,"
             " threshold_ns INTEGER, noise_ns INTEGER, p_value REAL, flag TEXT)");
    Stmt ins(mem.get(), "INSERT INTO d VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    std::map<Key, int> keys;
    for (auto* side : {&a, &b})
        for (auto& [k, v] : side->values)
            keys[k]++;
    const bool several = a.what.size() > 1 || b.what.size() > 1;
    static const Values kNone;
    static const std::array<std::vector<double>, 2> kNoP50s;
    for (auto& [k, n] : keys) {
        auto ia = a.values.find(k), ib = b.values.find(k);
        const auto& va = ia == a.values.end() ? kNone : ia->second;
        const auto& vb = ib == b.values.end() ? kNone : ib->second;
        auto pa = a.session_p50s.find(k), pb = b.session_p50s.find(k);
        const auto& sa = pa == a.session_p50s.end() ? kNoP50s : pa->second;
        const auto& sb = pb == b.session_p50s.end() ? kNoP50s : pb->second;
        for (int m = 0; m < 2; m++) {
            ins.bind(1, std::get<0>(k))
                .bind(2, std::get<1>(k))
                .bind(3, std::get<2>(k))
                .bind(4, std::string(m ? "overhead" : "bus"));
            compare(va[m], vb[m], ia != a.values.end(), ib != b.values.end(),
                    session_noise(sa[m], sb[m], rule.confidence), several, rule, ins);
            ins.step();
            ins.reset();
        }
    }
    // A register: its address space, its address as an address (64 bits
    // wide, never padded as a port) and its width.
    const std::string key = space == Space::mmio
                                ? "'mmio' AS space, printf('0x%x', port) AS addr, size, dir"
                                : "printf('0x%04x', port) AS port, dir";
    return print_query(mem.get(),
                       "SELECT " + key +
                           ", metric, a_count, b_count,"
                           " a_p50_ns, b_p50_ns, p50_change_ns, p50_ratio, a_p99_ns, b_p99_ns,"
                           " p99_change_ns, p99_ratio, shift_ns, shift_low_ns, shift_high_ns,"
                           " threshold_ns, noise_ns, p_value, flag FROM d"
                           " ORDER BY d.port, d.size, d.dir, d.metric",
                       f, out);
}

// A finite decimal number of percent within [lo, hi].
CLI::Validator percent_in(double lo, double hi) {
    char desc[64];
    std::snprintf(desc, sizeof(desc), "a number of percent from %g to %g", lo, hi);
    return CLI::Validator(
        [lo, hi, d = std::string(desc)](std::string& s) -> std::string {
            double v = NAN;
            auto [end, ec] =
                std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::fixed);
            if (ec != std::errc() || end != s.data() + s.size() || !(v >= lo && v <= hi))
                return "'" + s + "' is not " + d;
            return {};
        },
        "PERCENT");
}

} // namespace

void setup_diff(CLI::App& app, Globals& g, Runner& run) {
    (void)g; // DBs of its own, not the common --db
    auto* c = app.add_subcommand(
        "diff", "compare two sessions per port: bus time and overhead, and which changed");
    auto specs = std::make_shared<std::array<std::vector<std::string>, 3>>(); // --db, A, B
    auto format = std::make_shared<std::string>("table");
    auto rule = std::make_shared<Rule>();
    c->add_option("--db", (*specs)[0],
                  "FILE[:SESSION], twice: A, then B (default: the last session)")
        ->allow_extra_args(false)
        ->check(non_empty("--db"));
    c->add_option("--a-db", (*specs)[1], "FILE[:SESSION] of side A; repeat it for several sessions")
        ->allow_extra_args(false)
        ->check(non_empty("--a-db"));
    c->add_option("--b-db", (*specs)[2], "FILE[:SESSION] of side B; repeat it for several sessions")
        ->allow_extra_args(false)
        ->check(non_empty("--b-db"));
    c->add_option("--min-change", rule->min_change,
                  "a change of at most this % of A's p50 is not flagged (default 15)")
        ->check(percent_in(0, 1000));
    c->add_option("--min-change-ns", rule->min_change_ns,
                  "nor one of at most this many ns (default 10)")
        ->check(integer_in(0, 1000000000, "ns"));
    c->add_option("--confidence", rule->confidence,
                  "of the shift's interval and the sessions' bound, in % (default 99)")
        ->check(percent_in(50, 99.99));
    auto space = std::make_shared<SpaceOptions>();
    add_space_options(c, *space);
    c->add_option("--format", *format, "table, csv or json")
        ->check(CLI::IsMember({"table", "csv", "json"}));
    c->callback([c, &run, specs, format, rule, space] {
        auto sel = std::make_shared<Selection>();
        space_selected(c, *space, *sel);
        const auto& [both, a_specs, b_specs] = *specs;
        if (!both.empty() && (!a_specs.empty() || !b_specs.empty()))
            throw UserError("give either --db twice or --a-db and --b-db, not both",
                            "busprof diff --a-db A1.db --a-db A2.db --b-db B1.db --b-db B2.db");
        if (both.empty() && (a_specs.empty() || b_specs.empty()))
            throw UserError(both.empty() && a_specs.empty() && b_specs.empty()
                                ? "--db is required"
                                : "diff needs sessions on both sides: give --a-db and --b-db",
                            "busprof diff --db A.db[:SESSION] --db B.db[:SESSION]");
        if (!both.empty() && both.size() != 2)
            throw UserError("diff compares two sessions: give --db twice",
                            "busprof diff --db A.db[:SESSION] --db B.db[:SESSION]");
        auto parse = [](const std::vector<std::string>& v) {
            std::vector<Spec> out;
            for (const auto& s : v)
                out.push_back(parse_spec(s));
            return out;
        };
        auto sa =
            std::make_shared<std::vector<Spec>>(both.empty() ? parse(a_specs) : parse({both[0]}));
        auto sb =
            std::make_shared<std::vector<Spec>>(both.empty() ? parse(b_specs) : parse({both[1]}));
        run = [sa, sb, format, rule, sel] {
            Side a = load(*sa, *sel), b = load(*sb, *sel);
            for (const auto& w : a.what)
                std::cerr << "busprof: A: " << w << "\n";
            for (const auto& w : b.what)
                std::cerr << "busprof: B: " << w << "\n";
            Output out("-");
            const bool any =
                print_diff(a, b, *rule, sel->space, parse_format(*format), out.stream());
            out.commit();
            if (!any) {
                std::cerr << "busprof: no 'ok' "
                          << (sel->space == Space::mmio ? "memory-mapped " : "")
                          << "transactions in either session\n";
                return EXIT_SUCCESS;
            }
            std::cerr << "busprof: flag: the Hodges-Lehmann shift of B against A (shift_ns) is"
                         " significant (its "
                      << rule->confidence << " % interval excludes 0) and larger than "
                      << rule->min_change << " % of A's p50 and than " << rule->min_change_ns
                      << " ns (threshold_ns)"
                      << (a.what.size() > 1 || b.what.size() > 1
                              ? " and than the sessions' spread allows (noise_ns)"
                              : "")
                      << "; no test below " << kMinSamples << " values a side\n";
            if (a.what.size() == 1 && b.what.size() == 1)
                std::cerr << "busprof: one session a side: a flag may be the machine's load in"
                             " one of them, not the code; record several and give them with"
                             " --a-db and --b-db to measure the spread between runs\n";
            return EXIT_SUCCESS;
        };
    });
}

} // namespace busprof
