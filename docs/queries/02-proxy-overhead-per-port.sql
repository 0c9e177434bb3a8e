-- Title: How much of each port's access time is proxy overhead rather than bus time?
-- SPDX-License-Identifier: GPL-2.0-only
-- Per domain and port, over 'ok' transactions: the mean bus time, the mean
-- overhead (the rest of t_resume_ns - t_trap_ns: VM exit, ioreq round trip,
-- daemon) and the overhead's share of the guest's total wait, largest first.
-- A high share means the port is cheap and the measurement is dominated by
-- virtualisation cost.
SELECT domid,
       printf('0x%x', port) AS port,
       COUNT(*) AS accesses,
       ROUND(AVG(t_bus_end_ns - t_bus_begin_ns), 1) AS mean_bus_ns,
       ROUND(AVG((t_resume_ns - t_trap_ns) - (t_bus_end_ns - t_bus_begin_ns)), 1)
           AS mean_overhead_ns,
       ROUND(100.0 * SUM((t_resume_ns - t_trap_ns) - (t_bus_end_ns - t_bus_begin_ns))
                   / SUM(t_resume_ns - t_trap_ns), 1) AS overhead_pct
FROM transactions
WHERE status = 'ok'
GROUP BY domid, port
ORDER BY 1.0 * SUM((t_resume_ns - t_trap_ns) - (t_bus_end_ns - t_bus_begin_ns))
             / SUM(t_resume_ns - t_trap_ns) DESC,
         domid, transactions.port;
