-- Title: Which ports have the slowest bus accesses (p99 bus time)?
-- SPDX-License-Identifier: GPL-2.0-only
-- From the port_latency view: per domain, port and direction, the nearest-
-- rank percentiles of bus time (transaction_times.bus_ns) over 'ok'
-- transactions, slowest p99 first.  Bus time is what the device costs,
-- without the virtualisation overhead.
SELECT domid,
       printf('0x%x', port) AS port,
       dir,
       count,
       min_ns,
       p50_ns,
       p95_ns,
       p99_ns,
       max_ns
FROM port_latency
ORDER BY p99_ns DESC, domid, port_latency.port, dir
LIMIT 10;
