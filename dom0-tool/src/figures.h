/* SPDX-License-Identifier: GPL-2.0-only */
// The figures busprof derives, for the C++ that cannot read them from the
// schema's view transaction_times: a record's bus time and overhead (the
// writer's summaries) and the percentile (busprof top, report, diff), each
// defined as the schema defines it.
#pragma once

#include "record.h"

#include <cstdint>
#include <optional>
#include <span>

namespace busprof {

class Db;

// A record's bus time and overhead, as transaction_times computes them from
// the row the writer stores for it: signed differences of the stamps, no
// bus time where no bus access was made (t_bus_* of 0, stored NULL), no
// overhead then nor where the two clocks disagree (clock_skewed).
struct TransactionTimes {
    std::optional<int64_t> bus_ns, overhead_ns;
};
inline TransactionTimes times_of(const Record& r) {
    if (!r.t_bus_begin_ns || !r.t_bus_end_ns)
        return {};
    auto ns = [](uint64_t t) { return static_cast<int64_t>(t); };
    int64_t bus = ns(r.t_bus_end_ns) - ns(r.t_bus_begin_ns);
    if (r.flags & XEN_BUSPROF_RECORD_CLOCK_SKEWED)
        return {bus, std::nullopt};
    return {bus, ns(r.t_resume_ns) - ns(r.t_trap_ns) - bus};
}

// The percentile pct (1-100) of an ascending sample, by nearest rank: its
// ceil(n * pct / 100)-th smallest value, as the schema's views take it.
// The only one busprof computes.  The sample must not be empty.
int64_t nearest_rank(std::span<const int64_t> sorted, int pct);

// Makes the derived-times views (access_times, transaction_times,
// mmio_transaction_times) readable on a connection to a trace written
// before they existed and opened read-only: TEMP views of this busprof's
// definitions, over an empty TEMP mmio_transactions where the file has
// none (a file opened for writing gets them from the schema).  Nothing is
// written to the file.
void add_transaction_times(Db& db);

} // namespace busprof
