-- Title: Did busprof's own storage work hold any accesses?
-- SPDX-License-Identifier: GPL-2.0-only
-- Per session, the accesses served ('ok') that were in flight while the
-- daemon's writer committed rows or a checkpoint of the WAL ran
-- (storage_overlap = 1) against the others: how many, and their mean and
-- longest wait from trap to resume.  Where dom0 had a CPU to spare the two
-- look alike; where it had none, the marked ones wait longer, held by the
-- profiler.  A latency analysis that must see the path without busprof's
-- storage work leaves them out: WHERE storage_overlap = 0.
SELECT session_id,
       storage_overlap,
       COUNT(*) AS accesses,
       CAST(AVG(wait_ns) AS INTEGER) AS mean_wait_ns,
       MAX(wait_ns) AS max_wait_ns
FROM transaction_times
WHERE status = 'ok'
GROUP BY session_id, storage_overlap
ORDER BY session_id, storage_overlap;
