-- SPDX-License-Identifier: GPL-2.0-only
-- busprof trace database, schema version 7.
--
-- One clock for every time in this file: nanoseconds of dom0's
-- CLOCK_MONOTONIC (Xen TSC values are converted by the daemon).
-- Every table and column carries a comment; docs/schema.md is generated
-- from these comments and a test fails when one is missing.

-- Facts about this trace file.
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,      -- name of the fact: schema_version, clock, created_by
    value TEXT NOT NULL        -- its value
);

-- One profiling session of one guest domain, from attach to stop.
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,            -- session id
    domid INTEGER NOT NULL,            -- Xen domain id of the profiled guest
    domain_name TEXT NOT NULL,         -- the domain's name when the session began
    backend TEXT NOT NULL,             -- hypervisor backend: 'sim' or 'xen'
    bus TEXT NOT NULL,                 -- bus backend that performed the accesses: 'sim' or 'port'
    state TEXT NOT NULL
        CHECK (state IN ('configured', 'profiling', 'paused', 'stopped', 'aborted')), -- current state of the session state machine; 'aborted': its daemon ended without stopping it (killed, crashed), found when the DB was next opened for writing
    start_trigger TEXT NOT NULL,       -- what starts recording: 'start_trap', 'accesses:N' (after N accesses: the first N are not recorded), 'on:COND' (at the first access that matches COND, busprof(1) --start-on; it is recorded) or 'manual'
    pre_trigger INTEGER NOT NULL DEFAULT 0, -- the pre-trigger window asked for (--pre-trigger N): up to N accesses served before the start are kept, transactions.pre_trigger = 1; 0: none
    stop_trigger TEXT NOT NULL,        -- what stops it besides 'busprof stop' and the daemon's end: 'manual' (nothing else), or a comma-separated list of 'records:N', 'duration:NS', 'stop_trap', 'on:COND' (after the first recorded access that matches COND)
    created_ns INTEGER NOT NULL,       -- when the daemon attached to the domain (ns)
    started_ns INTEGER,                -- when recording first began (ns); NULL before
    stopped_ns INTEGER,                -- when the session stopped (ns); NULL while not stopped
    recorded INTEGER NOT NULL DEFAULT 0,   -- transactions written to this file (count), port accesses only (table transactions)
    dropped INTEGER NOT NULL DEFAULT 0,    -- transactions served but not recorded because the record queue was full, e.g. while the DB could not be written (count)
    notes_dropped INTEGER NOT NULL DEFAULT 0, -- guest markers and events not recorded because their queue was full (count)
    summarised INTEGER NOT NULL DEFAULT 0, -- transactions of this file counted in the summaries (latency_totals, latency_buckets), the first ones of the session: behind recorded by the rows its writer committed in the last second (at most 1048576), equal to it after a flush (busprof flush, a frame of busprof top) and once the session stopped; a daemon killed in between leaves it behind until the file is next opened for writing (count)
    unrecorded INTEGER NOT NULL DEFAULT 0, -- accesses served while not profiling: configured, paused or stopped (count)
    timeouts INTEGER NOT NULL DEFAULT 0,   -- accesses Xen completed without the daemon (count)
    clock_error_ns INTEGER,            -- how closely the daemon related Xen's stamp clock to CLOCK_MONOTONIC at attach: the offset is right within +/- this (ns); 0 when the hypervisor stamps CLOCK_MONOTONIC itself (the simulator)
    clock_skew_ns INTEGER NOT NULL DEFAULT 0, -- the largest disagreement between Xen's stamps and the daemon's seen in the session, as shown by records with clock_skewed = 1 (ns); 0: none seen; unflagged rows of the session may be off by up to this much as well
    owner TEXT,                        -- while a daemon serves the session: 'boot-id/pid/start-time' of that daemon process; NULL once it ended the session
    mmio_recorded INTEGER NOT NULL DEFAULT 0 -- memory-mapped accesses written to this file, table mmio_transactions (count).  Since schema version 7; an older file gets the column, 0, when it is next opened for writing
);

-- One trapped port access: performed on the real bus by the daemon.
-- Its CHECKs compare with = instead of IN (...): SQLite builds a temporary
-- table for an IN list at every row inserted, which made recording 2.8
-- times slower for the same guarantee.  No index but the id: one on
-- (domid, port) made every insert about 1.7 times slower and each row 13
-- bytes larger, and what it served (statistics per port) now comes from
-- latency_totals and latency_buckets.  A file written by an older busprof
-- keeps the index it has; for many lookups of single ports in a big trace,
-- add it yourself: CREATE INDEX transactions_by_port ON transactions (domid, port);
-- A row is written once its vCPU resumed from the access, and vCPUs resume in
-- their own time; a row waits for those served before it, so that ids keep
-- the order of service across vCPUs too.  Two things end the wait early: a
-- guest's extract, stop_trap or pause (its records go with it, past an access
-- of another vCPU that has not resumed yet), and 1024 rows waiting.
CREATE TABLE IF NOT EXISTS transactions (
    id INTEGER PRIMARY KEY,            -- transaction id, increasing in the order the daemon served them (but for the two early ends above the table)
    session_id INTEGER NOT NULL REFERENCES sessions(id), -- session it belongs to
    domid INTEGER NOT NULL,            -- Xen domain id of the guest that made the access
    vcpu INTEGER NOT NULL,             -- the guest's vCPU that executed the instruction
    rip INTEGER NOT NULL,              -- guest RIP of the IN/OUT instruction (64-bit, stored signed: kernel addresses read negative, printf('0x%x', rip) shows them); 0 if Xen gave no stamp
    port INTEGER NOT NULL CHECK (port BETWEEN 0 AND 65535), -- I/O port accessed
    size INTEGER NOT NULL CHECK (size = 1 OR size = 2 OR size = 4),        -- access width (bytes)
    dir TEXT NOT NULL CHECK (dir = 'in' OR dir = 'out'),         -- 'in' reads the port, 'out' writes it
    value INTEGER NOT NULL,            -- value written, or value read and returned to the guest
    t_trap_ns INTEGER NOT NULL,        -- Xen took the VM exit for the access (ns)
    t_bus_begin_ns INTEGER,            -- daemon, immediately before the real bus access (ns); NULL: no bus access was made
    t_bus_end_ns INTEGER,              -- daemon, immediately after the real bus access (ns); NULL: no bus access was made
    t_resume_ns INTEGER NOT NULL,      -- Xen resumed the guest vCPU with the result (ns); for 'timeout' rows: when the daemon learnt of the timeout; for an access the daemon served after it detached to stop (Xen stamps no resume then) or that it ended before the vCPU resumed: t_bus_end_ns
    clock_skewed INTEGER NOT NULL DEFAULT 0 CHECK (clock_skewed = 0 OR clock_skewed = 1), -- 1: Xen's stamps contradict the daemon's (t_trap_ns > t_bus_begin_ns or t_resume_ns < t_bus_end_ns, which cannot happen on one clock): Xen's CPU and dom0's clocks disagreed here, so this row's overhead is not to be trusted; the stamps are stored as measured
    task INTEGER,                      -- who made the access: on Xen the guest's page-table base during it (CR3 without its PCID and flag bits), which names the guest process (printf('0x%x', task)); on the simulator the guest thread's id; NULL if Xen gave no stamp
    pcpu INTEGER,                      -- the physical CPU the guest's vCPU ran on when it made the access; NULL if Xen gave no stamp
    pre_trigger INTEGER NOT NULL DEFAULT 0 CHECK (pre_trigger = 0 OR pre_trigger = 1), -- 1: served before recording started and kept by the pre-trigger window (busprof daemon --pre-trigger N): one of the last N accesses before the start
    status TEXT NOT NULL CHECK (status = 'ok' OR status = 'timeout' OR status = 'error'), -- 'ok'; 'timeout': Xen completed the access without the daemon's answer, value is what the guest got (all ones for 'in'), t_bus_* NULL if the daemon then left the bus alone, set if it had already made the access (a late 'out' did reach the device); 'error': refused, no bus access made, value all ones
    storage_overlap INTEGER NOT NULL DEFAULT 0 CHECK (storage_overlap = 0 OR storage_overlap = 1) -- 1: busprof's own storage work (its writer committing rows, or a checkpoint of the WAL) ran at some moment between t_trap_ns and t_resume_ns: where dom0 had no CPU to spare, this access may have waited for it, and its overhead (rarely its bus time) is then partly the profiler's; 0: none ran meanwhile.  Since schema version 6; a file of version 5 gets the column, all 0, when it is next opened for writing
);

-- One trapped memory-mapped access (interface 1.3): a guest's load or store
-- to a page of device memory (a PCI BAR) that the daemon performed on the
-- device.  Its columns are those of transactions with the same names and
-- meanings, but for the address space, the 64-bit address that takes
-- port's place, the 64-bit value and size 8.
-- Why a table of its own and not columns on transactions: every query,
-- view and summary written for ports (port_latency, latency_totals,
-- transaction_times, the golden queries, the commands' filters) keeps its
-- answer with no WHERE on a space, and no existing file needs a rebuild: a
-- trace of an older schema gets this table empty, where a new space and
-- address column and size 8 on transactions would have needed the table
-- copied row by row (SQLite cannot change a CHECK) and port made NULL or
-- meaningless for memory-mapped rows.  Rejected with it: a side table of
-- addresses joined to transactions rows (the same CHECKs in the way, and a
-- join on every read).  The cost: ids are per table, so the order of port
-- and memory-mapped accesses together is that of their stamps
-- (t_bus_begin_ns, on one clock), and a command that shows both reads two
-- tables.
CREATE TABLE IF NOT EXISTS mmio_transactions (
    id INTEGER PRIMARY KEY,            -- memory-mapped transaction id, increasing in the order the daemon served them as transactions.id does (its own sequence, apart from transactions.id)
    session_id INTEGER NOT NULL REFERENCES sessions(id), -- session it belongs to
    domid INTEGER NOT NULL,            -- Xen domain id of the guest that made the access
    vcpu INTEGER NOT NULL,             -- the guest's vCPU that executed the instruction
    rip INTEGER NOT NULL,              -- guest RIP of the load or store instruction (64-bit, stored signed as in transactions); 0 if Xen gave no stamp
    space TEXT NOT NULL DEFAULT 'mmio' CHECK (space = 'mmio'), -- address space of addr: 'mmio', guest-physical memory (ports are in transactions)
    addr INTEGER NOT NULL CHECK (addr BETWEEN 0 AND 4503599627370495), -- guest-physical address of the access's first byte (at most 2^52 - 1; printf('0x%x', addr) shows it as an address)
    size INTEGER NOT NULL CHECK (size = 1 OR size = 2 OR size = 4 OR size = 8), -- access width (bytes); an access Xen split (at a page boundary, rep movs/stos one element at a time) is one row per part
    dir TEXT NOT NULL CHECK (dir = 'in' OR dir = 'out'), -- 'in' reads the device (a load), 'out' writes it (a store)
    value INTEGER NOT NULL,            -- value written, or value read and returned to the guest: 64-bit, stored signed as rip is (an 8-byte value with its top bit set reads negative; printf('0x%x', value) shows its bits)
    t_trap_ns INTEGER NOT NULL,        -- Xen took the fault for the access (ns)
    t_bus_begin_ns INTEGER,            -- daemon, immediately before the access to the device (ns); NULL: no access was made
    t_bus_end_ns INTEGER,              -- daemon, immediately after it (ns); NULL: no access was made
    t_resume_ns INTEGER NOT NULL,      -- Xen resumed the guest vCPU with the result (ns), as in transactions
    clock_skewed INTEGER NOT NULL DEFAULT 0 CHECK (clock_skewed = 0 OR clock_skewed = 1), -- as in transactions
    task INTEGER,                      -- who made the access, as in transactions
    pcpu INTEGER,                      -- the physical CPU the guest's vCPU ran on, as in transactions
    pre_trigger INTEGER NOT NULL DEFAULT 0 CHECK (pre_trigger = 0 OR pre_trigger = 1), -- as in transactions
    status TEXT NOT NULL CHECK (status = 'ok' OR status = 'timeout' OR status = 'error'), -- as in transactions ('error': refused, value all ones of its size)
    storage_overlap INTEGER NOT NULL DEFAULT 0 CHECK (storage_overlap = 0 OR storage_overlap = 1) -- as in transactions
);

-- Session markers: trap calls (the guest's own, or dom0's for it) and changes of the session state.
CREATE TABLE IF NOT EXISTS markers (
    id INTEGER PRIMARY KEY,            -- marker id
    session_id INTEGER NOT NULL REFERENCES sessions(id), -- session it belongs to
    kind TEXT NOT NULL
        CHECK (kind IN ('start_trap', 'stop_trap', 'extract', 'start', 'pause', 'resume', 'stop')), -- what happened: a trap call (start_trap, stop_trap), a guest's extract, or a change of the session state (start, pause, resume, stop)
    origin TEXT CHECK (origin IN ('guest', 'dom0')), -- who made the call: 'guest' (its own start_trap, stop_trap, extract, or the pause/resume of its bp_pause/bp_resume) or 'dom0' ('busprof trap'/'busprof untrap' for a guest that never calls busprof, or a policy revoke that dropped the trap); NULL for the other changes of the session state
    vcpu INTEGER,                      -- guest vCPU that made the call; NULL for dom0's calls and the other changes of the session state
    port_first INTEGER,                -- first port of the range concerned; NULL if none
    port_last INTEGER,                 -- last port of the range concerned; NULL if none
    t_ns INTEGER NOT NULL,             -- when it happened (ns); Xen's stamp for guest calls
    cause TEXT,                        -- for start/pause/resume/stop: what made it: 'start_trap', 'accesses:N', 'on:COND' (--start-on/--stop-on), 'user' (busprof pause/resume/stop), 'guest' (the guest's bp_pause/bp_resume), 'stop_trap', 'records:N', 'duration', 'signal', 'detached', 'hypervisor_gone', 'shutdown'; NULL for trap calls and extracts
    addr_first INTEGER,                -- first guest-physical address of the memory-mapped span concerned (a trap call or extract on one; port_first and port_last are NULL then); NULL for ports or none.  Since schema version 7
    addr_last INTEGER                  -- last guest-physical address of that span, inclusive; NULL where addr_first is
);

-- Things that went wrong or out of the ordinary during a session.
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,            -- event id
    session_id INTEGER NOT NULL REFERENCES sessions(id), -- session it belongs to
    kind TEXT NOT NULL
        CHECK (kind IN ('timeout', 'detached', 'ctrl_lost', 'queue_full', 'refused', 'storage', 'aborted', 'hypervisor_gone')), -- what happened; 'storage': the DB could not be written for a while; 'aborted': the session's daemon ended without stopping it; 'hypervisor_gone': the (simulated) hypervisor went away
    t_ns INTEGER NOT NULL,             -- when the daemon noticed it (ns)
    detail TEXT NOT NULL               -- human-readable description
);

-- Running totals per session, domain, port and direction over 'ok'
-- transactions, kept by the daemon's writer: it adds the rows it committed
-- to them at most every second while it records (every 1048576 rows if
-- that comes first), at once with the rows of a flush (busprof flush, a
-- frame of busprof top) and when a session stops, so they agree with the transactions
-- table whenever sessions.summarised = sessions.recorded; the rows they
-- lag are the last recorded - summarised of each session, which busprof
-- stats reads one by one.  A daemon killed in between leaves rows out until
-- the file is next opened for writing, which adds them.  Bus time and
-- overhead as transaction_times defines them; overhead over the rows with
-- clock_skewed = 0 only.  Since schema version 5.
CREATE TABLE IF NOT EXISTS latency_totals (
    session_id INTEGER NOT NULL REFERENCES sessions(id), -- session the transactions belong to
    domid INTEGER NOT NULL,            -- Xen domain id
    port INTEGER NOT NULL,             -- I/O port
    dir TEXT NOT NULL,                 -- 'in' or 'out'
    count INTEGER NOT NULL,            -- 'ok' transactions (count)
    bus_min_ns INTEGER,                -- fastest bus time (ns); NULL if no row made a bus access
    bus_max_ns INTEGER,                -- slowest bus time (ns)
    bus_sum_ns INTEGER NOT NULL,       -- sum of the bus times (ns)
    overhead_count INTEGER NOT NULL,   -- rows whose overhead counts: clock_skewed = 0 (count)
    overhead_min_ns INTEGER,           -- smallest overhead (ns); NULL if overhead_count = 0
    overhead_max_ns INTEGER,           -- largest overhead (ns)
    overhead_sum_ns INTEGER NOT NULL,  -- sum of the overheads (ns)
    PRIMARY KEY (session_id, domid, port, dir)
) WITHOUT ROWID;

-- Log-linear histograms of bus time and overhead per session, domain, port
-- and direction, kept by the writer with latency_totals (HdrHistogram's
-- layout): a value below 256 ns has a bucket of its own; above, each power
-- of two is cut into 128 buckets of equal width, so a bucket is at most
-- 1/128 of its lowest value wide and its middle, lo_ns + (hi_ns - lo_ns + 1)
-- / 2, is within 1/256 (0.39 %) of every value in it.  Only buckets that
-- hold a value have a row.  Written with latency_totals.  busprof report's
-- histograms use the same layout with four buckets per power of two (below
-- 8 ns one per value), each the union of 32 of these: one layout, read
-- finely enough for a percentile here and coarsely enough for a chart there.
CREATE TABLE IF NOT EXISTS latency_buckets (
    session_id INTEGER NOT NULL REFERENCES sessions(id), -- session the transactions belong to
    domid INTEGER NOT NULL,            -- Xen domain id
    port INTEGER NOT NULL,             -- I/O port
    dir TEXT NOT NULL,                 -- 'in' or 'out'
    metric TEXT NOT NULL,              -- 'bus': bus time; 'overhead': overhead of a row with clock_skewed = 0
    lo_ns INTEGER NOT NULL,            -- the bucket's lowest value (ns)
    hi_ns INTEGER NOT NULL,            -- the bucket's highest value (ns), inclusive
    count INTEGER NOT NULL,            -- values in the bucket (count)
    PRIMARY KEY (session_id, domid, port, dir, metric, lo_ns)
) WITHOUT ROWID;

-- Every access, port or memory-mapped, with the times derived from its
-- stamps, each defined here once: transaction_times and
-- mmio_transaction_times are this view's rows of one table each, and the
-- views below and every busprof command read bus time, wait and overhead
-- from them, never from the stamps, so no two of them can disagree.  Bus
-- time is measured on the daemon's clock and the wait on Xen's; overhead
-- and its two parts subtract one from the other, so they are NULL on a row
-- whose two clocks disagree (clock_skewed = 1), and every figure of
-- overhead leaves those rows out.  Latency statistics (port_latency,
-- busprof stats, top, report, diff) take the rows with status = 'ok'.
-- One view over both tables rather than one per table: a second copy of
-- the formulas is a second definition that may come to disagree.  The
-- price: SQLite cannot flatten a UNION ALL into an aggregate or a window
-- query, so those read transaction_times through a co-routine, slower
-- than the table alone.
-- A view adds no data: a trace written before it existed gets it when
-- busprof opens the file (as a TEMP view when it opens it read-only).
CREATE VIEW IF NOT EXISTS access_times AS
SELECT
       space,                           -- address space: 'port' (a row of transactions) or 'mmio' (a row of mmio_transactions)
       id,                              -- the access's id in its table (transactions.id or mmio_transactions.id; the two sequences are apart)
       session_id,                      -- session it belongs to
       domid,                           -- Xen domain id of the guest that made the access
       vcpu,                            -- the guest's vCPU that executed the instruction
       rip,                             -- guest RIP of the instruction, stored signed
       addr,                            -- the port (space 'port') or the guest-physical address (space 'mmio') accessed
       size,                            -- access width (bytes)
       dir,                             -- 'in' (a read) or 'out' (a write)
       value,                           -- value written or read, stored signed
       t_trap_ns,                       -- Xen took the exit or fault for the access (ns)
       t_bus_begin_ns,                  -- daemon, immediately before the bus or device access (ns); NULL: none was made
       t_bus_end_ns,                    -- daemon, immediately after it (ns); NULL: none was made
       t_resume_ns,                     -- Xen resumed the guest vCPU with the result (ns)
       clock_skewed,                    -- 1: Xen's stamps contradict the daemon's, as transactions.clock_skewed says
       task,                            -- who made the access, as in transactions
       pcpu,                            -- the physical CPU the vCPU ran on, as in transactions
       pre_trigger,                     -- 1: kept by the pre-trigger window, as in transactions
       status,                          -- 'ok', 'timeout' or 'error', as in transactions
       storage_overlap,                 -- 1: busprof's storage work ran meanwhile, as in transactions
       t_bus_end_ns - t_bus_begin_ns AS bus_ns,                 -- bus time: the real access alone, t_bus_end_ns - t_bus_begin_ns (ns); NULL: no bus access was made
       t_resume_ns - t_trap_ns AS wait_ns,                      -- how long the guest waited for the access, t_resume_ns - t_trap_ns (ns)
       CASE WHEN clock_skewed = 0
            THEN (t_resume_ns - t_trap_ns) - (t_bus_end_ns - t_bus_begin_ns) END AS overhead_ns, -- proxy overhead: the wait less the bus time, i.e. trap_to_bus_ns + bus_to_resume_ns (ns); NULL when clock_skewed = 1 or no bus access was made
       CASE WHEN clock_skewed = 0 AND t_bus_end_ns IS NOT NULL
            THEN t_bus_begin_ns - t_trap_ns END AS trap_to_bus_ns, -- the overhead's first part: VM exit, ioreq and the daemon up to the bus access, t_bus_begin_ns - t_trap_ns (ns); NULL where overhead_ns is
       CASE WHEN clock_skewed = 0 AND t_bus_begin_ns IS NOT NULL
            THEN t_resume_ns - t_bus_end_ns END AS bus_to_resume_ns -- its second part: the daemon's answer back to the guest's resume, t_resume_ns - t_bus_end_ns (ns); NULL where overhead_ns is
FROM (SELECT 'port' AS space, id, session_id, domid, vcpu, rip, port AS addr, size, dir, value,
             t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, clock_skewed, task, pcpu,
             pre_trigger, status, storage_overlap
      FROM transactions
      UNION ALL
      SELECT space, id, session_id, domid, vcpu, rip, addr, size, dir, value,
             t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns, clock_skewed, task, pcpu,
             pre_trigger, status, storage_overlap
      FROM mmio_transactions) AS a;

-- Every port transaction with the times derived from its stamps: the rows
-- of access_times with space = 'port', under the names and in the column
-- order of transactions.
CREATE VIEW IF NOT EXISTS transaction_times AS
SELECT
       id,                              -- as stored in transactions
       session_id,                      -- as stored in transactions
       domid,                           -- as stored in transactions
       vcpu,                            -- as stored in transactions
       rip,                             -- as stored in transactions
       addr AS port,                    -- as stored in transactions
       size,                            -- as stored in transactions
       dir,                             -- as stored in transactions
       value,                           -- as stored in transactions
       t_trap_ns,                       -- as stored in transactions
       t_bus_begin_ns,                  -- as stored in transactions
       t_bus_end_ns,                    -- as stored in transactions
       t_resume_ns,                     -- as stored in transactions
       clock_skewed,                    -- as stored in transactions
       task,                            -- as stored in transactions
       pcpu,                            -- as stored in transactions
       pre_trigger,                     -- as stored in transactions
       status,                          -- as stored in transactions
       storage_overlap,                 -- as stored in transactions
       bus_ns,                          -- bus time, as access_times defines it (ns)
       wait_ns,                         -- the guest's wait, as access_times defines it (ns)
       overhead_ns,                     -- proxy overhead, as access_times defines it (ns)
       trap_to_bus_ns,                  -- the overhead's first part, as access_times defines it (ns)
       bus_to_resume_ns                 -- its second part, as access_times defines it (ns)
FROM access_times
WHERE space = 'port';

-- Every memory-mapped transaction with the times derived from its stamps:
-- the rows of access_times with space = 'mmio', under the names and in the
-- column order of mmio_transactions.
CREATE VIEW IF NOT EXISTS mmio_transaction_times AS
SELECT
       id,                              -- as stored in mmio_transactions
       session_id,                      -- as stored in mmio_transactions
       domid,                           -- as stored in mmio_transactions
       vcpu,                            -- as stored in mmio_transactions
       rip,                             -- as stored in mmio_transactions
       space,                           -- as stored in mmio_transactions
       addr,                            -- as stored in mmio_transactions
       size,                            -- as stored in mmio_transactions
       dir,                             -- as stored in mmio_transactions
       value,                           -- as stored in mmio_transactions
       t_trap_ns,                       -- as stored in mmio_transactions
       t_bus_begin_ns,                  -- as stored in mmio_transactions
       t_bus_end_ns,                    -- as stored in mmio_transactions
       t_resume_ns,                     -- as stored in mmio_transactions
       clock_skewed,                    -- as stored in mmio_transactions
       task,                            -- as stored in mmio_transactions
       pcpu,                            -- as stored in mmio_transactions
       pre_trigger,                     -- as stored in mmio_transactions
       status,                          -- as stored in mmio_transactions
       storage_overlap,                 -- as stored in mmio_transactions
       bus_ns,                          -- bus time, as access_times defines it (ns)
       wait_ns,                         -- the guest's wait, as access_times defines it (ns)
       overhead_ns,                     -- proxy overhead, as access_times defines it (ns)
       trap_to_bus_ns,                  -- the overhead's first part, as access_times defines it (ns)
       bus_to_resume_ns                 -- its second part, as access_times defines it (ns)
FROM access_times
WHERE space = 'mmio';

-- Bus latency and proxy overhead per port and direction, over 'ok'
-- transactions: bus time and overhead as transaction_times defines them
-- (overhead over the rows whose two clocks agree, clock_skewed = 0).
-- Percentiles use the nearest-rank method: the p-th percentile of n values
-- is the ceil(n * p / 100)-th smallest, as in every busprof command.
CREATE VIEW IF NOT EXISTS port_latency AS
WITH t AS (
    SELECT domid, port, dir, bus_ns, overhead_ns,
           ROW_NUMBER() OVER w AS rn,
           COUNT(*) OVER (PARTITION BY domid, port, dir) AS n
    FROM transaction_times
    WHERE status = 'ok'
    WINDOW w AS (PARTITION BY domid, port, dir ORDER BY bus_ns)
)
SELECT domid,                                                   -- Xen domain id
       port,                                                    -- I/O port
       dir,                                                     -- 'in' or 'out'
       MAX(n) AS count,                                         -- transactions (count)
       MIN(bus_ns) AS min_ns,                                   -- fastest bus time (ns)
       MIN(CASE WHEN rn >= (n * 50 + 99) / 100 THEN bus_ns END) AS p50_ns, -- median bus time (ns)
       MIN(CASE WHEN rn >= (n * 95 + 99) / 100 THEN bus_ns END) AS p95_ns, -- 95th percentile bus time (ns)
       MIN(CASE WHEN rn >= (n * 99 + 99) / 100 THEN bus_ns END) AS p99_ns, -- 99th percentile bus time (ns)
       MAX(bus_ns) AS max_ns,                                   -- slowest bus time (ns)
       AVG(overhead_ns) AS mean_overhead_ns                     -- mean proxy overhead per access, rows with clock_skewed = 1 left out (ns); NULL if every row is skewed
FROM t
GROUP BY domid, port, dir;

-- port_latency from the writer's summaries (latency_totals, latency_buckets)
-- instead of every row: it answers in milliseconds on any trace.  count,
-- min_ns, max_ns and mean_overhead_ns are exact; a percentile is the middle
-- of the bucket that holds the nearest-rank value (kept within min_ns and
-- max_ns), within 1/256 (0.39 %) of the exact one.  It covers the rows
-- counted in sessions.summarised (while a daemon records, all but those of
-- the last second: busprof stats adds them); empty for a trace of schema
-- version 4 or older.
CREATE VIEW IF NOT EXISTS port_latency_summary AS
WITH b AS (
    SELECT domid, port, dir, metric, lo_ns + (hi_ns - lo_ns + 1) / 2 AS mid_ns,
           SUM(count) AS count
    FROM latency_buckets
    GROUP BY domid, port, dir, metric, lo_ns
), r AS (
    SELECT domid, port, dir, metric, mid_ns,
           SUM(count) OVER (PARTITION BY domid, port, dir, metric ORDER BY mid_ns) AS cum,
           SUM(count) OVER (PARTITION BY domid, port, dir, metric) AS n
    FROM b
), p AS (
    SELECT domid, port, dir,
           MIN(CASE WHEN metric = 'bus' AND cum >= (n * 50 + 99) / 100 THEN mid_ns END) AS b50,
           MIN(CASE WHEN metric = 'bus' AND cum >= (n * 95 + 99) / 100 THEN mid_ns END) AS b95,
           MIN(CASE WHEN metric = 'bus' AND cum >= (n * 99 + 99) / 100 THEN mid_ns END) AS b99,
           MIN(CASE WHEN metric = 'overhead' AND cum >= (n * 50 + 99) / 100 THEN mid_ns END) AS o50,
           MIN(CASE WHEN metric = 'overhead' AND cum >= (n * 99 + 99) / 100 THEN mid_ns END) AS o99
    FROM r
    GROUP BY domid, port, dir
), t AS (
    SELECT domid, port, dir, SUM(count) AS count,
           MIN(bus_min_ns) AS bmin, MAX(bus_max_ns) AS bmax,
           SUM(overhead_count) AS on_, SUM(overhead_sum_ns) AS osum,
           MIN(overhead_min_ns) AS omin, MAX(overhead_max_ns) AS omax
    FROM latency_totals
    GROUP BY domid, port, dir
)
SELECT t.domid AS domid,                                        -- Xen domain id
       t.port AS port,                                          -- I/O port
       t.dir AS dir,                                            -- 'in' or 'out'
       t.count AS count,                                        -- transactions (count), exact
       t.bmin AS min_ns,                                        -- fastest bus time (ns), exact
       MIN(MAX(p.b50, t.bmin), t.bmax) AS p50_ns,               -- median bus time (ns), within 1/256
       MIN(MAX(p.b95, t.bmin), t.bmax) AS p95_ns,               -- 95th percentile bus time (ns), within 1/256
       MIN(MAX(p.b99, t.bmin), t.bmax) AS p99_ns,               -- 99th percentile bus time (ns), within 1/256
       t.bmax AS max_ns,                                        -- slowest bus time (ns), exact
       CASE WHEN t.on_ > 0 THEN t.osum * 1.0 / t.on_ END AS mean_overhead_ns, -- mean proxy overhead per access, rows with clock_skewed = 1 left out (ns), exact; NULL if every row is skewed
       MIN(MAX(p.o50, t.omin), t.omax) AS p50_overhead_ns,      -- median proxy overhead, rows with clock_skewed = 1 left out (ns), within 1/256
       MIN(MAX(p.o99, t.omin), t.omax) AS p99_overhead_ns       -- 99th percentile proxy overhead, likewise (ns), within 1/256
FROM t LEFT JOIN p ON p.domid = t.domid AND p.port = t.port AND p.dir = t.dir;
