-- Title: Which accesses happened between each start_trap and its stop_trap?
-- SPDX-License-Identifier: GPL-2.0-only
-- A trap window runs from a start_trap marker to the next stop_trap marker of
-- the same session and the same port range; origin says who opened it: the
-- guest ('guest', its vCPU) or dom0 for a guest that never calls busprof
-- ('dom0', busprof trap; no vCPU).  Xen drops every trap
-- when an access times out or the daemon detaches, so a window may have no
-- stop_trap: stop_ns is then NULL and the window runs to the session's end.
-- Counted: the session's transactions on the window's ports trapped inside
-- it, whatever vCPU made them (traps are per domain); bus_ns over 'ok' ones.
WITH windows AS (
    SELECT s.session_id, s.origin, s.vcpu, s.port_first, s.port_last, s.t_ns AS start_ns,
           (SELECT MIN(e.t_ns) FROM markers e
            WHERE e.session_id = s.session_id AND e.kind = 'stop_trap'
              AND e.port_first = s.port_first AND e.port_last = s.port_last
              AND e.t_ns > s.t_ns) AS stop_ns
    FROM markers s
    WHERE s.kind = 'start_trap'
)
SELECT w.session_id,
       w.origin,
       w.vcpu,
       printf('0x%x-0x%x', w.port_first, w.port_last) AS ports,
       w.start_ns,
       w.stop_ns,
       w.stop_ns - w.start_ns AS duration_ns,
       COUNT(t.id) AS accesses,
       MIN(t.id) AS first_id,
       MAX(t.id) AS last_id,
       SUM(CASE WHEN t.status = 'ok' THEN t.bus_ns END) AS bus_ns
FROM windows w
LEFT JOIN transaction_times t
       ON t.session_id = w.session_id
      AND t.port BETWEEN w.port_first AND w.port_last
      AND t.t_trap_ns > w.start_ns
      AND (w.stop_ns IS NULL OR t.t_trap_ns < w.stop_ns)
GROUP BY w.session_id, w.start_ns, w.port_first, w.port_last, w.origin, w.vcpu, w.stop_ns
ORDER BY w.session_id, w.start_ns;
