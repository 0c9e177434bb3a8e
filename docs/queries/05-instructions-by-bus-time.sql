-- Title: Which instructions (RIP) are responsible for most bus time?
-- SPDX-License-Identifier: GPL-2.0-only
-- Per domain, the five IN/OUT instructions whose 'ok' accesses spent the
-- most time on the bus, with their share of the domain's bus time.  RIPs are
-- stored as signed 64-bit integers; printf('0x%x') shows kernel addresses
-- (top half) correctly.  Look them up with addr2line or the driver's map.
WITH per_rip AS (
    SELECT domid, rip,
           COUNT(*) AS accesses,
           GROUP_CONCAT(DISTINCT printf('0x%x', port)) AS ports,
           SUM(bus_ns) AS bus_ns
    FROM transaction_times
    WHERE status = 'ok'
    GROUP BY domid, rip
), ranked AS (
    SELECT *,
           ROW_NUMBER() OVER (PARTITION BY domid ORDER BY bus_ns DESC, rip) AS rank,
           SUM(bus_ns) OVER (PARTITION BY domid) AS domain_bus_ns
    FROM per_rip
)
SELECT domid,
       rank,
       printf('0x%x', rip) AS rip,
       accesses,
       ports,
       bus_ns,
       ROUND(100.0 * bus_ns / domain_bus_ns, 1) AS share_pct
FROM ranked
WHERE rank <= 5
ORDER BY domid, rank;
