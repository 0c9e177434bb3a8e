-- Title: Which device registers did each session access, how often and how wide?
-- SPDX-License-Identifier: GPL-2.0-only
-- The memory-mapped accesses (mmio_transactions) per session, domain,
-- register address, width and direction, with the values first and last
-- seen there.  Addresses and values print as hex: a 64-bit value is stored
-- signed, as rip is, and printf('0x%x', value) shows its bits.
SELECT session_id,
       domid,
       printf('0x%x', addr) AS addr,
       size,
       dir,
       COUNT(*) AS accesses,
       printf('0x%x', (SELECT f.value FROM mmio_transactions f
                       WHERE f.session_id = t.session_id AND f.domid = t.domid
                         AND f.addr = t.addr AND f.size = t.size AND f.dir = t.dir
                       ORDER BY f.id LIMIT 1)) AS first_value,
       printf('0x%x', (SELECT l.value FROM mmio_transactions l
                       WHERE l.session_id = t.session_id AND l.domid = t.domid
                         AND l.addr = t.addr AND l.size = t.size AND l.dir = t.dir
                       ORDER BY l.id DESC LIMIT 1)) AS last_value
FROM mmio_transactions t
GROUP BY session_id, domid, t.addr, size, dir
ORDER BY session_id, domid, t.addr, size, dir;
