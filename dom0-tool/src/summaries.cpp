// SPDX-License-Identifier: GPL-2.0-only
#include "summaries.h"

#include "record_row.h"

#include <string>

namespace busprof {

void Summaries::write(sqlite3* db, const std::vector<int64_t>& sessions) {
    Stmt done(db, "UPDATE sessions SET summarised = recorded WHERE id = ?");
    for (int64_t id : sessions) {
        if (!id)
            continue; // a session whose row a later note creates
        done.bind(1, id);
        done.step();
        done.reset();
    }
    if (groups_.empty())
        return;
    Stmt tot(db, "INSERT INTO latency_totals (session_id, domid, port, dir, count,"
                 " bus_min_ns, bus_max_ns, bus_sum_ns, overhead_count, overhead_min_ns,"
                 " overhead_max_ns, overhead_sum_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
                 " ON CONFLICT (session_id, domid, port, dir) DO UPDATE SET"
                 " count = count + excluded.count,"
                 " bus_min_ns = COALESCE(MIN(bus_min_ns, excluded.bus_min_ns), bus_min_ns,"
                 "  excluded.bus_min_ns),"
                 " bus_max_ns = COALESCE(MAX(bus_max_ns, excluded.bus_max_ns), bus_max_ns,"
                 "  excluded.bus_max_ns),"
                 " bus_sum_ns = bus_sum_ns + excluded.bus_sum_ns,"
                 " overhead_count = overhead_count + excluded.overhead_count,"
                 " overhead_min_ns = COALESCE(MIN(overhead_min_ns, excluded.overhead_min_ns),"
                 "  overhead_min_ns, excluded.overhead_min_ns),"
                 " overhead_max_ns = COALESCE(MAX(overhead_max_ns, excluded.overhead_max_ns),"
                 "  overhead_max_ns, excluded.overhead_max_ns),"
                 " overhead_sum_ns = overhead_sum_ns + excluded.overhead_sum_ns");
    Stmt bkt(db, "INSERT INTO latency_buckets (session_id, domid, port, dir, metric, lo_ns,"
                 " hi_ns, count) VALUES (?,?,?,?,?,?,?,?)"
                 " ON CONFLICT (session_id, domid, port, dir, metric, lo_ns) DO UPDATE SET"
                 " count = count + excluded.count");
    for (auto& [k, g] : groups_) {
        tot.bind(1, k.session).bind(2, k.domid).bind(3, k.port).bind(4, dir_name(k.dir));
        tot.bind(5, static_cast<int64_t>(g.count));
        g.bus.bind(tot, 6);
        tot.bind(9, static_cast<int64_t>(g.overhead.n));
        g.overhead.bind(tot, 10);
        tot.step();
        tot.reset();
        for (auto* m : {&g.bus, &g.overhead}) {
            m->each([&](const Bucket& b, uint64_t count) {
                bkt.bind(1, k.session).bind(2, k.domid).bind(3, k.port);
                bkt.bind(4, dir_name(k.dir)).bind(5, m == &g.bus ? "bus" : "overhead");
                bkt.bind(6, b.lo).bind(7, b.hi).bind(8, static_cast<int64_t>(count));
                bkt.step();
                bkt.reset();
            });
        }
    }
}

// Adds the rows of a session that its writer committed but did not yet
// count in the summaries (its daemon was killed in between): the last
// recorded - summarised rows.
void summarise_rest(Db& db, int64_t session) {
    Summaries sums;
    Stmt q(db.get(), std::string("SELECT ") + kSummaryColumns +
                         " FROM transactions WHERE session_id = ?1 ORDER BY id DESC"
                         " LIMIT (SELECT recorded - summarised FROM sessions WHERE id = ?1)");
    q.bind(1, session);
    while (q.step())
        sums.add(session, summary_record(q.get()));
    sums.write(db.get(), {session});
}

} // namespace busprof
