-- Title: Which host has the slowest bus accesses on each port (count and p99 bus time per host)?
-- Over fleet_transactions: the transactions of many hosts with a first
-- column host (docs/fleet.md makes it from their trace DBs or CSV files).
-- Bus time and the nearest-rank p99 as port_latency takes them, over the
-- 'ok' rows: the p99 is the smallest bus time whose rank rn in its group
-- of n has rn * 100 >= n * 99, integer arithmetic that SQLite, DuckDB and
-- ClickHouse all compute alike.  Per port and direction, the slowest host
-- first.
WITH t AS (
    SELECT host, port, dir,
           t_bus_end_ns - t_bus_begin_ns AS bus_ns,
           ROW_NUMBER() OVER (PARTITION BY host, port, dir
                              ORDER BY t_bus_end_ns - t_bus_begin_ns) AS rn,
           COUNT(*) OVER (PARTITION BY host, port, dir) AS n
    FROM fleet_transactions
    WHERE status = 'ok' AND t_bus_begin_ns IS NOT NULL AND t_bus_end_ns IS NOT NULL
)
SELECT host,
       printf('0x%04x', t.port) AS port,
       dir,
       MAX(n) AS count,
       MIN(CASE WHEN rn * 100 >= n * 99 THEN bus_ns END) AS p99_ns
FROM t
GROUP BY host, t.port, dir
ORDER BY t.port, dir, p99_ns DESC, host;
