// SPDX-License-Identifier: GPL-2.0-only
#include "latency.h"

#include "db.h"

namespace busprof {

namespace {

// " AND (column BETWEEN first AND last OR ...)" for each range.
template <typename Range>
std::string ranges_condition(const char* column, const std::vector<Range>& ranges) {
    if (ranges.empty())
        return {};
    std::string c = " AND (";
    for (size_t i = 0; i < ranges.size(); i++)
        c += (i ? " OR " : "") + std::string(column) + " BETWEEN " +
             std::to_string(ranges[i].first) + " AND " + std::to_string(ranges[i].last);
    return c + ")";
}

// The columns that name a row of the table, as stored and as printed.
struct Key {
    std::string stored, shown, order; // order: of the stored values, not the shown text
};

Key key_of(Grouping by, Space space) {
    switch (by) {
    case Grouping::vcpu:
        return {"domid, vcpu", "domid, vcpu", "r.domid, r.vcpu"};
    case Grouping::task:
        // Hex, as the schema shows a page-table base; NULL: no stamp.
        return {"domid, task",
                "domid, CASE WHEN task IS NULL THEN NULL ELSE printf('0x%x', task) END AS task",
                "r.domid, r.task"};
    case Grouping::port:
        break;
    }
    // A register: its address as an address (64 bits wide, never padded
    // as a port) and its width.
    if (space == Space::mmio)
        return {"domid, addr, size, dir",
                "domid, 'mmio' AS space, printf('0x%x', addr) AS addr, size, dir",
                "r.domid, r.addr, r.size, r.dir"};
    return {"domid, port, dir", "domid, printf('0x%04x', port) AS port, dir",
            "r.domid, r.port, r.dir"};
}

// The nearest-rank percentile pct of column v among count n values, where
// column rank is the rank of v's row in ascending order (of a bucket's
// value: the rank of the last value in it), as port_latency computes them.
std::string pct(const char* v, const char* rank, const char* n, int pct) {
    return std::string("MIN(CASE WHEN ") + rank + " >= (" + n + " * " + std::to_string(pct) +
           " + 99) / 100 THEN " + v + " END)";
}

// Bus time and overhead of the 'ok' rows, from the schema's definition of
// them: the exact table and the rows the summaries lag read them alike.
const std::string kBusAndOverhead = "bus_ns, overhead_ns AS ovh_ns";
const std::string kOkRows = " FROM transaction_times WHERE status = 'ok'";

std::string exact_sql(const Selection& sel, Grouping by) {
    Key k = key_of(by, sel.space);
    std::string sql = "WITH t AS (SELECT " + k.stored + ", " + kBusAndOverhead +
                      ", trap_to_bus_ns AS to_bus_ns, bus_to_resume_ns AS to_resume_ns FROM " +
                      sel.times_view() + " WHERE status = 'ok'" + sel.on_rows() + ")";
    // Ranks by each column; the rows without overhead rank after the
    // others, whose count is no.
    std::string over = " OVER (PARTITION BY " + k.stored;
    sql += ", r AS (SELECT *, ROW_NUMBER()" + over + " ORDER BY bus_ns) AS rb";
    sql += ", ROW_NUMBER()" + over + " ORDER BY ovh_ns NULLS LAST) AS ro";
    sql += ", ROW_NUMBER()" + over + " ORDER BY to_bus_ns NULLS LAST) AS r1";
    sql += ", ROW_NUMBER()" + over + " ORDER BY to_resume_ns NULLS LAST) AS r2";
    sql += ", COUNT(*)" + over + ") AS n, COUNT(ovh_ns)" + over + ") AS no FROM t)";
    sql += " SELECT " + k.shown + ", MAX(n) AS count, MIN(bus_ns) AS min_ns";
    for (int p : {50, 95, 99})
        sql += ", " + pct("bus_ns", "rb", "n", p) + " AS p" + std::to_string(p) + "_ns";
    sql += ", MAX(bus_ns) AS max_ns, CAST(round(AVG(ovh_ns)) AS INTEGER) AS mean_overhead_ns";
    sql += ", " + pct("ovh_ns", "ro", "no", 50) + " AS p50_overhead_ns";
    sql += ", " + pct("to_bus_ns", "r1", "no", 50) + " AS p50_trap_to_bus_ns";
    sql += ", " + pct("to_resume_ns", "r2", "no", 50) + " AS p50_bus_to_resume_ns";
    return sql + " FROM r GROUP BY " + k.stored + " ORDER BY " + k.order;
}

// port_latency_summary's SQL (schema/busprof.sql) with the selection's
// conditions on the summary tables, which the view cannot take (it has no
// session column), and the rows the summaries lag (tails) added to them,
// each at its exact value.
std::string summary_sql(const Selection& sel, const std::vector<SummaryLag>& tails) {
    std::string f = " WHERE 1" + sel.on_summaries();
    // Each tail read by id, the rowid: no index but the id is needed.
    std::string from = tails.empty() ? " AND 0" : " AND (";
    for (size_t i = 0; i < tails.size(); i++)
        from += (i ? " OR " : "") + std::string("(session_id = ") +
                std::to_string(tails[i].session) +
                " AND id >= " + std::to_string(tails[i].from_id) + ")";
    if (!tails.empty())
        from += ")";
    std::string tail = "tail AS (SELECT domid, port, dir, " + kBusAndOverhead + kOkRows + from +
                       sel.on_summaries() + "),";
    return "WITH " + tail +
           " b AS (SELECT domid, port, dir, metric, mid_ns, SUM(count) AS count FROM"
           " (SELECT domid, port, dir, metric, lo_ns + (hi_ns - lo_ns + 1) / 2 AS mid_ns, count"
           " FROM latency_buckets" +
           f +
           " UNION ALL SELECT domid, port, dir, 'bus', bus_ns, 1 FROM tail WHERE bus_ns IS NOT NULL"
           " UNION ALL SELECT domid, port, dir, 'overhead', ovh_ns, 1 FROM tail"
           " WHERE ovh_ns IS NOT NULL)"
           " GROUP BY domid, port, dir, metric, mid_ns),"
           " r AS (SELECT domid, port, dir, metric, mid_ns,"
           " SUM(count) OVER (PARTITION BY domid, port, dir, metric ORDER BY mid_ns) AS cum,"
           " SUM(count) OVER (PARTITION BY domid, port, dir, metric) AS n FROM b),"
           " p AS (SELECT domid, port, dir, " +
           pct("CASE WHEN metric = 'bus' THEN mid_ns END", "cum", "n", 50) + " AS b50, " +
           pct("CASE WHEN metric = 'bus' THEN mid_ns END", "cum", "n", 95) + " AS b95, " +
           pct("CASE WHEN metric = 'bus' THEN mid_ns END", "cum", "n", 99) + " AS b99, " +
           pct("CASE WHEN metric = 'overhead' THEN mid_ns END", "cum", "n", 50) +
           " AS o50 FROM r GROUP BY domid, port, dir),"
           " t AS (SELECT domid, port, dir, SUM(count) AS count, MIN(bmin) AS bmin,"
           " MAX(bmax) AS bmax, SUM(on_) AS on_, SUM(osum) AS osum, MIN(omin) AS omin,"
           " MAX(omax) AS omax FROM (SELECT domid, port, dir, count, bus_min_ns AS bmin,"
           " bus_max_ns AS bmax, overhead_count AS on_, overhead_sum_ns AS osum,"
           " overhead_min_ns AS omin, overhead_max_ns AS omax FROM latency_totals" +
           f +
           " UNION ALL SELECT domid, port, dir, 1, bus_ns, bus_ns, ovh_ns IS NOT NULL,"
           " COALESCE(ovh_ns, 0), ovh_ns, ovh_ns FROM tail)"
           " GROUP BY domid, port, dir)"
           " SELECT t.domid AS domid, printf('0x%04x', t.port) AS port, t.dir AS dir,"
           " t.count AS count, t.bmin AS min_ns, MIN(MAX(p.b50, t.bmin), t.bmax) AS p50_ns,"
           " MIN(MAX(p.b95, t.bmin), t.bmax) AS p95_ns, MIN(MAX(p.b99, t.bmin), t.bmax) AS p99_ns,"
           " t.bmax AS max_ns, CAST(round(CASE WHEN t.on_ > 0 THEN t.osum * 1.0 / t.on_ END)"
           " AS INTEGER) AS mean_overhead_ns, MIN(MAX(p.o50, t.omin), t.omax) AS p50_overhead_ns,"
           " NULL AS p50_trap_to_bus_ns, NULL AS p50_bus_to_resume_ns"
           " FROM t LEFT JOIN p ON p.domid = t.domid AND p.port = t.port AND p.dir = t.dir"
           " ORDER BY t.domid, t.port, t.dir";
}

} // namespace

const char* Selection::times_view() const {
    return space == Space::mmio ? "mmio_transaction_times" : "transaction_times";
}

std::string Selection::on_rows() const {
    std::string c = on_summaries();
    if (vcpu >= 0)
        c += " AND vcpu = " + std::to_string(vcpu);
    return c;
}

std::string Selection::on_summaries() const {
    std::string c;
    if (session >= 0)
        c += " AND session_id = " + std::to_string(session);
    if (domid >= 0)
        c += " AND domid = " + std::to_string(domid);
    return c + (space == Space::mmio ? ranges_condition("addr", mmio)
                                     : ranges_condition("port", ports));
}

std::string Selection::on_sessions() const {
    std::string c;
    if (session >= 0)
        c += " AND id = " + std::to_string(session);
    if (domid >= 0)
        c += " AND domid = " + std::to_string(domid);
    return c;
}

bool summaries_answer(const Selection& sel, Grouping by) {
    return by == Grouping::port && sel.vcpu < 0 && sel.space == Space::port;
}

bool latency_exact(Db& db, const Selection& sel, Grouping by, bool asked, std::string* why) {
    if (asked)
        return true;
    if (sel.space == Space::mmio) {
        if (why && db.scalar(std::string("SELECT count(*) FROM ") + sel.times_view() + " WHERE 1" +
                             sel.on_rows()) > kExactUpTo)
            *why = "the summaries keep no memory-mapped accesses: percentiles from every row"
                   " (slow on a big trace)";
        return true;
    }
    if (!db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'latency_totals'")) {
        if (why &&
            db.scalar("SELECT count(*) FROM transactions WHERE 1" + sel.on_rows()) > kExactUpTo)
            *why = "this trace was written before busprof kept summaries: percentiles from"
                   " every row (slow on a big trace)";
        return true;
    }
    int64_t lag = db.scalar("SELECT COALESCE(SUM(recorded - summarised), 0) FROM sessions WHERE 1" +
                            sel.on_sessions());
    int64_t n = db.scalar("SELECT COALESCE(SUM(count), 0) FROM latency_totals WHERE 1" +
                          sel.on_summaries());
    if (!summaries_answer(sel, by)) {
        // The summaries' count bounds the selection's from above: it is
        // only a reason to warn.
        if (why && n + lag > kExactUpTo)
            *why = std::string("the summaries are not kept per ") +
                   (by == Grouping::task ? "task" : "vCPU") +
                   ": percentiles from every row (slow on a big trace)";
        return true;
    }
    // The rows the summaries lag are read one by one (summary_lag()).
    return n + lag <= kExactUpTo;
}

std::vector<SummaryLag> summary_lag(Db& db, const Selection& sel) {
    std::vector<std::pair<int64_t, int64_t>> lagging; // (session, rows)
    {
        Stmt s(db.get(), "SELECT id, recorded - summarised FROM sessions WHERE"
                         " recorded > summarised" +
                             sel.on_sessions() + " ORDER BY id");
        while (s.step())
            lagging.emplace_back(sqlite3_column_int64(s.get(), 0),
                                 sqlite3_column_int64(s.get(), 1));
    }
    // A session's rows from the end of the table backwards: the live
    // session's are the last, and a lag is at most what its writer
    // committed in the last kSummaryMs (or what a killed daemon left).
    std::vector<SummaryLag> tails;
    Stmt first(db.get(), "SELECT id FROM transactions WHERE session_id = ? ORDER BY id DESC"
                         " LIMIT 1 OFFSET ?");
    for (auto [session, rows] : lagging) {
        first.bind(1, session).bind(2, rows - 1);
        if (first.step())
            tails.push_back({session, sqlite3_column_int64(first.get(), 0)});
        first.reset();
    }
    return tails;
}

std::string latency_sql(const Selection& sel, Grouping by, bool exact,
                        const std::vector<SummaryLag>& tails) {
    return exact || !summaries_answer(sel, by) ? exact_sql(sel, by) : summary_sql(sel, tails);
}

std::string latency_sql(Db& db, const Selection& sel, Grouping by, bool exact) {
    // Which table answers is the other form's choice; this one only spares
    // reading the rows the summaries lag where they do not answer.
    const bool summaries = !exact && summaries_answer(sel, by);
    return latency_sql(sel, by, exact,
                       summaries ? summary_lag(db, sel) : std::vector<SummaryLag>{});
}

} // namespace busprof
