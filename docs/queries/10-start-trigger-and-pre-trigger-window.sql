-- Title: What did each session's start trigger catch, and what came just before it?
-- SPDX-License-Identifier: GPL-2.0-only
-- A session started on a match (busprof daemon --start-on COND) records the
-- access that matched first; with --pre-trigger N the last N accesses served
-- before it are stored too, marked pre_trigger = 1.  Per session: how it was
-- started, its first recorded access (the first transaction not marked
-- pre_trigger: for an on:COND start, the access that matched), how many
-- accesses the window kept and how long before that access the earliest of
-- them was trapped.
SELECT s.id AS session_id,
       s.start_trigger,
       f.id AS trigger_id,
       printf('0x%x', f.port) AS trigger_port,
       f.dir AS trigger_dir,
       printf('0x%x', f.value) AS trigger_value,
       (SELECT COUNT(*) FROM transactions p
        WHERE p.session_id = s.id AND p.pre_trigger = 1) AS pre_trigger_accesses,
       f.t_trap_ns - (SELECT MIN(p.t_trap_ns) FROM transactions p
                      WHERE p.session_id = s.id AND p.pre_trigger = 1) AS window_ns
FROM sessions s
LEFT JOIN transactions f
       ON f.id = (SELECT MIN(t.id) FROM transactions t
                  WHERE t.session_id = s.id AND t.pre_trigger = 0)
ORDER BY s.id;
