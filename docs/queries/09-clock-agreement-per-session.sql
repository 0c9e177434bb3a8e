-- Title: Can each session's trap and resume times be compared with its bus times?
-- SPDX-License-Identifier: GPL-2.0-only
-- Per session: how closely the daemon related Xen's stamp clock to dom0's at
-- attach (clock_error_ns; 0 when the hypervisor stamps dom0's clock), the
-- largest disagreement seen (clock_skew_ns), and the rows flagged
-- clock_skewed, whose overhead is not to be trusted.  0 skewed rows: every
-- row's stamps are in the order one clock would give.
SELECT s.id AS session_id,
       s.domain_name,
       s.backend,
       s.clock_error_ns,
       s.clock_skew_ns,
       (SELECT COUNT(*) FROM transactions t
        WHERE t.session_id = s.id AND t.clock_skewed = 1) AS skewed_rows,
       s.recorded
FROM sessions s
ORDER BY s.id;
