-- Title: Did the edu device's liveness register read back the inverse of each write?
-- SPDX-License-Identifier: GPL-2.0-only
-- QEMU's edu device (and the simulator's) returns at offset 0x04 of its BAR
-- the bitwise inverse of the last value written there.  Every memory-mapped
-- read of a liveness register (a 4-byte access at page offset 0x004) next to
-- the last write to the same address before it in the session; matches is
-- NULL when nothing was written first.  Addresses and values print as hex
-- (a 64-bit value is stored signed, printf shows its bits).
SELECT t.session_id,
       t.id,
       printf('0x%x', t.addr) AS addr,
       CASE WHEN w.value IS NOT NULL THEN printf('0x%08x', w.value) END AS written,
       printf('0x%08x', t.value) AS read,
       CASE WHEN w.value IS NULL THEN NULL
            WHEN (~w.value & 0xffffffff) = t.value THEN 'yes' ELSE 'no' END AS matches
FROM mmio_transactions t
LEFT JOIN mmio_transactions w
       ON w.id = (SELECT MAX(o.id) FROM mmio_transactions o
                  WHERE o.session_id = t.session_id AND o.addr = t.addr
                    AND o.dir = 'out' AND o.id < t.id)
WHERE t.dir = 'in' AND t.size = 4 AND (t.addr & 0xfff) = 0x004
ORDER BY t.session_id, t.id;
