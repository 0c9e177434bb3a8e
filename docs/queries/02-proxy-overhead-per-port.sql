-- Title: How much of each port's access time is proxy overhead rather than bus time?
-- SPDX-License-Identifier: GPL-2.0-only
-- Per domain and port, over 'ok' transactions: the mean bus time, the mean
-- overhead (the rest of the guest's wait: VM exit, ioreq round trip, daemon)
-- and the overhead's share of the wait, largest first, both over the rows
-- whose clocks agree (transaction_times leaves the others' overhead NULL).
-- A high share means the port is cheap and the measurement is dominated by
-- virtualisation cost.
SELECT domid,
       printf('0x%x', port) AS port,
       COUNT(*) AS accesses,
       ROUND(AVG(bus_ns), 1) AS mean_bus_ns,
       ROUND(AVG(overhead_ns), 1) AS mean_overhead_ns,
       ROUND(100.0 * SUM(overhead_ns) / SUM(bus_ns + overhead_ns), 1) AS overhead_pct
FROM transaction_times
WHERE status = 'ok'
GROUP BY domid, port
ORDER BY 1.0 * SUM(overhead_ns) / SUM(bus_ns + overhead_ns) DESC,
         domid, transaction_times.port;
