-- Title: Did any session lose, time out or refuse accesses?
-- SPDX-License-Identifier: GPL-2.0-only
-- Per session: transactions recorded and dropped on a full record queue,
-- accesses Xen completed without the daemon (sessions.timeouts), the
-- recorded transactions with status 'timeout' and 'error', and how many
-- events the daemon logged.  All zeros but 'recorded' is a clean session.
SELECT s.id AS session_id,
       s.domid,
       s.domain_name,
       s.recorded,
       s.dropped,
       s.timeouts AS xen_timeouts,
       (SELECT COUNT(*) FROM transactions t
        WHERE t.session_id = s.id AND t.status = 'timeout') AS timeout_transactions,
       (SELECT COUNT(*) FROM transactions t
        WHERE t.session_id = s.id AND t.status = 'error') AS error_transactions,
       (SELECT COUNT(*) FROM events e WHERE e.session_id = s.id) AS events
FROM sessions s
ORDER BY s.id;
