-- Title: Did the UART scratch register read back what was written?
-- SPDX-License-Identifier: GPL-2.0-only
-- Every read of a 16550 scratch register (base + 7 for the usual bases
-- 0x3f8, 0x2f8, 0x3e8, 0x2e8) next to the last value written to it before in
-- the same session, by any vCPU.  matches is NULL when nothing was written
-- first; a 'timeout' read returns all ones, not the device's value.
SELECT t.session_id,
       t.id,
       t.vcpu,
       printf('0x%x', t.port) AS port,
       CASE WHEN w.value IS NOT NULL THEN printf('0x%02x', w.value) END AS written,
       printf('0x%02x', t.value) AS read,
       t.status,
       CASE WHEN w.value IS NULL THEN NULL
            WHEN w.value = t.value THEN 'yes' ELSE 'no' END AS matches
FROM transactions t
LEFT JOIN transactions w
       ON w.id = (SELECT MAX(o.id) FROM transactions o
                  WHERE o.session_id = t.session_id AND o.port = t.port
                    AND o.dir = 'out' AND o.id < t.id)
WHERE t.dir = 'in' AND t.port IN (0x3ff, 0x2ff, 0x3ef, 0x2ef)
ORDER BY t.session_id, t.id;
