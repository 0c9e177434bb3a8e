-- Title: What happened during each session, in order?
-- SPDX-License-Identifier: GPL-2.0-only
-- Markers (the guest's trap and extract calls, the dom0 user's commands)
-- and events (timeouts, detaches, refusals, a full queue) of every session
-- on one time line, in ns since the session started recording.
SELECT session_id, since_start_ns, source, kind, vcpu, ports, detail
FROM (
    SELECT m.session_id,
           m.t_ns - s.started_ns AS since_start_ns,
           'marker' AS source,
           m.kind,
           m.vcpu,
           CASE WHEN m.port_first IS NOT NULL
                THEN printf('0x%x-0x%x', m.port_first, m.port_last) END AS ports,
           NULL AS detail,
           m.t_ns, 0 AS tie, m.id
    FROM markers m JOIN sessions s ON s.id = m.session_id
    UNION ALL
    SELECT e.session_id,
           e.t_ns - s.started_ns,
           'event',
           e.kind,
           NULL,
           NULL,
           e.detail,
           e.t_ns, 1, e.id
    FROM events e JOIN sessions s ON s.id = e.session_id
)
ORDER BY session_id, t_ns, tie, id;
