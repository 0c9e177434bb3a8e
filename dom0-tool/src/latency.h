/* SPDX-License-Identifier: GPL-2.0-only */
// The latency tables of busprof stats (and demo): which transactions they
// cover, how they are grouped, whether the writer's summaries can answer
// or every row must be read, and their SQL.
#pragma once

#include "ranges.h"

#include <cstdint>
#include <string>
#include <vector>

namespace busprof {

class Db;

// The address space a table covers: port transactions (transactions) or
// memory-mapped ones (mmio_transactions).
enum class Space { port, mmio };

// Which transactions a table covers; -1 or empty: all.  ports filters
// port rows, mmio memory-mapped rows (each access whose first byte lies
// in a span).
struct Selection {
    int64_t session = -1;
    int domid = -1;
    int vcpu = -1;
    std::vector<PortRange> ports;
    Space space = Space::port;
    std::vector<MmioRange> mmio;

    bool empty() const {
        return session < 0 && domid < 0 && vcpu < 0 && ports.empty() && mmio.empty();
    }
    // The view of the space's rows with their derived times:
    // transaction_times or mmio_transaction_times.
    const char* times_view() const;
    // " AND ..." conditions on transactions (every field), on the summary
    // tables (session, domain, ports: they keep no vCPU) and on sessions
    // (session, domain).
    std::string on_rows() const;
    std::string on_summaries() const;
    std::string on_sessions() const;
};

// Rows of the table: per domain, port and direction (memory-mapped: per
// domain, register and direction, a register being an address and a
// width), per domain and vCPU, or per domain and task.
enum class Grouping { port, vcpu, task };

// Up to this many 'ok' transactions in the selection, stats reads every row
// (well under a second); above, the summaries (latency_totals and
// latency_buckets).
constexpr int64_t kExactUpTo = 100000;

// Whether the summaries hold what the table asks: they are kept per
// session, domain, port and direction only, of port transactions.
bool summaries_answer(const Selection& sel, Grouping by);

// Whether the percentiles come from every row: asked for, a grouping or a
// filter the summaries cannot answer, a trace whose writer kept no summaries
// (schema version 4 or older), or a selection small enough to sort quickly.
// why, if given: the reason a big selection is read row by row.
bool latency_exact(Db& db, const Selection& sel, Grouping by, bool asked,
                   std::string* why = nullptr);

// The rows of a session that its summaries do not hold yet: its last
// recorded - summarised rows, from id from_id on.  A writer adds rows to
// the summaries at most every Writer::kSummaryMs while it records, and a
// killed daemon may leave more (until the file is next opened for writing).
struct SummaryLag {
    int64_t session, from_id;
};
// Those of the selection's sessions.  Read in the same read transaction as
// the table (BEGIN ... COMMIT around both): the summaries and
// sessions.summarised change together, in one commit.
std::vector<SummaryLag> summary_lag(Db& db, const Selection& sel);

// The table: the key columns of the grouping, count, bus time (min, p50,
// p95, p99, max), the mean and median overhead and the medians of its two
// parts, trap to bus begin and bus end to resume (empty from the
// summaries, which keep no parts).  Nearest-rank percentiles; overhead and
// its parts over the rows with clock_skewed = 0.  exact: from every row,
// else from the summaries (Grouping::port only) and the rows they lag
// (tails, from summary_lag()), at their exact values.
std::string latency_sql(const Selection& sel, Grouping by, bool exact,
                        const std::vector<SummaryLag>& tails);
// The same for the file as it is now: from the summaries, with the rows
// they lag (summary_lag()).  In the read transaction of the query, where a
// daemon may be writing the file.
std::string latency_sql(Db& db, const Selection& sel, Grouping by, bool exact);

} // namespace busprof
