-- Title: How many transactions did each vCPU make, and how much bus time did they take?
-- SPDX-License-Identifier: GPL-2.0-only
-- Per session and vCPU: all recorded transactions, split into reads ('in')
-- and writes ('out'), those that did not complete normally ('timeout' or
-- 'error'), and the bus time of the 'ok' ones.
SELECT session_id,
       domid,
       vcpu,
       COUNT(*) AS transactions,
       SUM(dir = 'in') AS reads,
       SUM(dir = 'out') AS writes,
       SUM(status <> 'ok') AS not_ok,
       SUM(CASE WHEN status = 'ok' THEN bus_ns END) AS bus_ns
FROM transaction_times
GROUP BY session_id, domid, vcpu
ORDER BY session_id, vcpu;
