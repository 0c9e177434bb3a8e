-- SPDX-License-Identifier: GPL-2.0-only
-- Fixture for the golden tests of docs/queries/*.sql: a small, hand-made
-- trace that the expected files in tests/sql/expected/ were worked out from.
-- Loaded after schema/busprof.sql into an empty in-memory database.
--
-- Every transaction is built the same way, so its times can be checked by
-- hand:  t_bus_begin = t_trap + pre,  t_bus_end = t_bus_begin + bus,
--        t_resume = t_bus_end + post;  bus time = bus, overhead = pre + post.
--
-- Session 1: domain 3 "uart-test" on the simulator (ns from 1 ms on);
--   task is the guest thread's id (4242 on vCPU 0, 4243 on vCPU 1).
--   vCPU 0 runs the UART scratch loop three times on 0x3f8-0x3ff (base + 7 =
--   scratch, base + 5 = line status), pre 2000 / post 3000 ns; vCPU 1 writes
--   and reads CMOS NVRAM at 0x70/0x71 meanwhile, pre 1500 / post 2500 ns;
--   later vCPU 1 traps the UART again and sends one character.
--   3 records were dropped on a full queue.
-- Session 2: domain 5 "rtc-guest" on Xen with the port bus (ns from 5 s on),
--   a kernel driver (RIPs in the top half, stored two's complement); task is
--   the page-table base: the RTC driver runs in a kernel thread whose CR3 is
--   0x10a4000 (vCPU 0 on pCPU 2), the UART test in one with 0x2b7e000 (vCPU
--   2 on pCPU 3).
--   vCPU 0 reads five RTC registers, pre 3000 / post 4000 ns; vCPU 2 tests
--   the UART scratch register, pre 3500 / post 4500 ns: one access refused
--   ('error') and one that hung until Xen's 1000 ms timeout ('timeout'),
--   after which Xen dropped the domain's traps (no stop_trap marker).
--   The RTC driver cannot call busprof: dom0 trapped 0x70-0x71 for it
--   (busprof trap/untrap: markers of origin 'dom0', no vCPU).  The session
--   started on a match (--start-on 'port=0x70,dir=out,value=0x02', the
--   select of register 2) with a pre-trigger window of 2: the register 0
--   select and read before it are kept, pre_trigger = 1.
--   Its kernel driver of the edu device (BAR 0xfebf0000) runs the edu
--   sequence under a memory-mapped trap on vCPU 0 (mmio_transactions, ids
--   of their own, pre 3000 / post 4000 ns): the ID register, two liveness
--   write/read pairs (the second read broken: a bit stuck at 0), a factorial
--   polled once busy, an 8-byte write and read of the scratch register at
--   0x80 whose value has its top bit set (stored two's complement).

INSERT INTO meta (key, value) VALUES
    ('schema_version', '4'),
    ('clock', 'CLOCK_MONOTONIC'),
    ('created_by', 'tests/sql/fixture.sql');

INSERT INTO sessions (id, domid, domain_name, backend, bus, state,
                      start_trigger, stop_trigger, created_ns, started_ns,
                      stopped_ns, recorded, dropped, unrecorded, timeouts,
                      clock_error_ns, clock_skew_ns)
VALUES
    (1, 3, 'uart-test', 'sim', 'sim',  'stopped', 'start_trap', 'manual',
        1000000, 1100000, 1400000, 15, 3, 0, 0, 0, 0),
    (2, 5, 'rtc-guest', 'xen', 'port', 'stopped', 'on:port=0x70,dir=out,value=0x02', 'manual',
        5000000000, 5000130000, 6100000000, 17, 0, 0, 1, 23000, 0);

INSERT INTO markers (id, session_id, kind, origin, vcpu, port_first, port_last, t_ns)
VALUES
    (1,  1, 'start_trap', 'guest', 0,    0x3f8, 0x3ff, 1100000),
    (2,  1, 'start_trap', 'guest', 1,    0x70,  0x71,  1105000),
    (3,  1, 'stop_trap',  'guest', 0,    0x3f8, 0x3ff, 1200000),
    (4,  1, 'stop_trap',  'guest', 1,    0x70,  0x71,  1201000),
    (5,  1, 'extract',    'guest', 0,    0x3f8, 0x3ff, 1210000),
    (6,  1, 'start_trap', 'guest', 1,    0x3f8, 0x3ff, 1300000),
    (7,  1, 'stop_trap',  'guest', 1,    0x3f8, 0x3ff, 1330000),
    (8,  1, 'stop',       NULL,    NULL, NULL,  NULL,  1400000),
    (9,  2, 'start_trap', 'dom0',  NULL, 0x70,  0x71,  5000100000),
    (10, 2, 'stop_trap',  'dom0',  NULL, 0x70,  0x71,  5000250000),
    (11, 2, 'start_trap', 'guest', 2,    0x3f8, 0x3ff, 5000300000),
    (12, 2, 'stop',       NULL,    NULL, NULL,  NULL,  6100000000);

INSERT INTO events (id, session_id, kind, t_ns, detail) VALUES
    (1, 1, 'queue_full', 1175000,
        '3 transactions dropped: record queue full'),
    (2, 2, 'refused', 5000353600,
        'port 0x3fe: the port bus backend refused the access, no I/O permission'),
    (3, 2, 'timeout', 6000370500,
        'vCPU 2: in from port 0x3ff completed by Xen after 1000 ms, read all ones'),
    (4, 2, 'detached', 6000371000,
        'Xen dropped every trap of domain 5 after the timeout');

INSERT INTO transactions (id, session_id, domid, vcpu, rip, port, size, dir,
                          value, t_trap_ns, t_bus_begin_ns, t_bus_end_ns,
                          t_resume_ns, status, pre_trigger, task, pcpu)
VALUES
    -- session 1, vCPU 0: scratch loop (pre 2000, post 3000)
    --                                                           bus
    (1,  1, 3, 0, 0x401a2c, 0x3ff, 1, 'out', 0x0b, 1110000, 1112000, 1113000, 1116000, 'ok', 0, 4242, 0), -- 1000
    -- session 1, vCPU 1: CMOS (pre 1500, post 2500), interleaved
    (2,  1, 3, 1, 0x401b10, 0x70,  1, 'out', 0x40, 1114000, 1115500, 1117500, 1120000, 'ok', 0, 4243, 1), -- 2000
    (3,  1, 3, 0, 0x401a3b, 0x3ff, 1, 'in',  0x0b, 1120000, 1122000, 1123200, 1126200, 'ok', 0, 4242, 0), -- 1200
    (4,  1, 3, 1, 0x401b1e, 0x71,  1, 'in',  0x5a, 1122000, 1123500, 1126500, 1129000, 'ok', 0, 4243, 1), -- 3000
    (5,  1, 3, 0, 0x401a4f, 0x3fd, 1, 'in',  0x60, 1130000, 1132000, 1132800, 1135800, 'ok', 0, 4242, 0), --  800
    (6,  1, 3, 0, 0x401a2c, 0x3ff, 1, 'out', 0x30, 1140000, 1142000, 1143000, 1146000, 'ok', 0, 4242, 0), -- 1000
    (7,  1, 3, 1, 0x401b10, 0x70,  1, 'out', 0x41, 1141000, 1142500, 1144500, 1147000, 'ok', 0, 4243, 1), -- 2000
    (8,  1, 3, 0, 0x401a3b, 0x3ff, 1, 'in',  0x30, 1150000, 1152000, 1153400, 1156400, 'ok', 0, 4242, 0), -- 1400
    (9,  1, 3, 1, 0x401b1e, 0x71,  1, 'in',  0x5b, 1151000, 1152500, 1155100, 1157600, 'ok', 0, 4243, 1), -- 2600
    (10, 1, 3, 0, 0x401a4f, 0x3fd, 1, 'in',  0x60, 1160000, 1162000, 1162800, 1165800, 'ok', 0, 4242, 0), --  800
    (11, 1, 3, 0, 0x401a2c, 0x3ff, 1, 'out', 0x55, 1170000, 1172000, 1173000, 1176000, 'ok', 0, 4242, 0), -- 1000
    (12, 1, 3, 0, 0x401a3b, 0x3ff, 1, 'in',  0x55, 1180000, 1182000, 1187000, 1190000, 'ok', 0, 4242, 0), -- 5000
    (13, 1, 3, 0, 0x401a4f, 0x3fd, 1, 'in',  0x60, 1192000, 1194000, 1194900, 1197900, 'ok', 0, 4242, 0), --  900
    -- session 1, vCPU 1: second UART window, one character (pre 1500, post 2600)
    (14, 1, 3, 1, 0x401c00, 0x3f8, 1, 'out', 0x41, 1310000, 1311500, 1312400, 1315000, 'ok', 0, 4243, 1), --  900
    (15, 1, 3, 1, 0x401c0a, 0x3fd, 1, 'in',  0x60, 1320000, 1321500, 1322200, 1324800, 'ok', 0, 4243, 1), --  700

    -- session 2, vCPU 0: RTC registers 0x00 0x02 0x04 0x0a 0x0b (pre 3000, post 4000)
    (16, 2, 5, 0, 0xffffffffc0a01120, 0x70, 1, 'out', 0x00, 5000110000, 5000113000, 5000114500, 5000118500, 'ok', 1, 0x10a4000, 2), -- 1500
    (17, 2, 5, 0, 0xffffffffc0a0112c, 0x71, 1, 'in',  0x30, 5000120000, 5000123000, 5000124800, 5000128800, 'ok', 1, 0x10a4000, 2), -- 1800
    (18, 2, 5, 0, 0xffffffffc0a01120, 0x70, 1, 'out', 0x02, 5000130000, 5000133000, 5000134500, 5000138500, 'ok', 0, 0x10a4000, 2), -- 1500
    (19, 2, 5, 0, 0xffffffffc0a0112c, 0x71, 1, 'in',  0x15, 5000140000, 5000143000, 5000144700, 5000148700, 'ok', 0, 0x10a4000, 2), -- 1700
    (20, 2, 5, 0, 0xffffffffc0a01120, 0x70, 1, 'out', 0x04, 5000150000, 5000153000, 5000154500, 5000158500, 'ok', 0, 0x10a4000, 2), -- 1500
    (21, 2, 5, 0, 0xffffffffc0a0112c, 0x71, 1, 'in',  0x09, 5000160000, 5000163000, 5000165200, 5000169200, 'ok', 0, 0x10a4000, 2), -- 2200
    (22, 2, 5, 0, 0xffffffffc0a01120, 0x70, 1, 'out', 0x0a, 5000170000, 5000173000, 5000174500, 5000178500, 'ok', 0, 0x10a4000, 2), -- 1500
    (23, 2, 5, 0, 0xffffffffc0a0112c, 0x71, 1, 'in',  0x26, 5000180000, 5000183000, 5000184900, 5000188900, 'ok', 0, 0x10a4000, 2), -- 1900
    (24, 2, 5, 0, 0xffffffffc0a01120, 0x70, 1, 'out', 0x0b, 5000190000, 5000193000, 5000194600, 5000198600, 'ok', 0, 0x10a4000, 2), -- 1600
    (25, 2, 5, 0, 0xffffffffc0a0112c, 0x71, 1, 'in',  0x02, 5000200000, 5000203000, 5000205000, 5000209000, 'ok', 0, 0x10a4000, 2), -- 2000
    -- session 2, vCPU 2: UART scratch (pre 3500, post 4500)
    (26, 2, 5, 2, 0xffffffffc0a02040, 0x3ff, 1, 'out', 0x5a, 5000310000, 5000313500, 5000314600, 5000319100, 'ok', 0, 0x2b7e000, 3), -- 1100
    (27, 2, 5, 2, 0xffffffffc0a0204c, 0x3ff, 1, 'in',  0x5a, 5000320000, 5000323500, 5000324800, 5000329300, 'ok', 0, 0x2b7e000, 3), -- 1300
    (28, 2, 5, 2, 0xffffffffc0a02040, 0x3ff, 1, 'out', 0xa5, 5000330000, 5000333500, 5000334600, 5000339100, 'ok', 0, 0x2b7e000, 3), -- 1100
    (29, 2, 5, 2, 0xffffffffc0a0204c, 0x3ff, 1, 'in',  0xa5, 5000340000, 5000343500, 5000345000, 5000349500, 'ok', 0, 0x2b7e000, 3), -- 1500
    -- refused by the bus backend: no access made, the guest read all ones
    (30, 2, 5, 2, 0xffffffffc0a02060, 0x3fe, 1, 'in',  0xff, 5000350000, 5000353500, 5000353500, 5000358000, 'error', 0, 0x2b7e000, 3),
    (31, 2, 5, 2, 0xffffffffc0a02040, 0x3ff, 1, 'out', 0x3c, 5000360000, 5000363500, 5000364600, 5000369100, 'ok', 0, 0x2b7e000, 3), -- 1100
    -- the device hung for 1.5 s; Xen completed the read after 1000 ms with all
    -- ones.  The daemon never saw the resume stamp: t_resume = t_bus_end.
    (32, 2, 5, 2, 0xffffffffc0a0204c, 0x3ff, 1, 'in',  0xff, 5000370000, 5000373500, 6500373500, 6500373500, 'timeout', 0, 0x2b7e000, 3);

-- Session 1: the daemon's writer committed from 1171000 to 1184000 ns, while
-- vCPU 0's accesses 11 and 12 were in flight.
UPDATE transactions SET storage_overlap = 1 WHERE id IN (11, 12);

-- Session 2's memory-mapped accesses.
INSERT INTO mmio_transactions (id, session_id, domid, vcpu, rip, addr, size, dir, value,
                               t_trap_ns, t_bus_begin_ns, t_bus_end_ns, t_resume_ns,
                               status, pre_trigger, task, pcpu)
VALUES
    (1 , 2, 5, 0, 0xffffffffc0a03010, 0xfebf0000, 4, 'in',  0x010000ed, 5000410000, 5000413000, 5000413800, 5000417800, 'ok', 0, 0x10a4000, 2), -- 800
    (2 , 2, 5, 0, 0xffffffffc0a03020, 0xfebf0004, 4, 'out', 0x12345678, 5000420000, 5000423000, 5000423700, 5000427700, 'ok', 0, 0x10a4000, 2), -- 700
    (3 , 2, 5, 0, 0xffffffffc0a03028, 0xfebf0004, 4, 'in',  0xedcba987, 5000430000, 5000433000, 5000433750, 5000437750, 'ok', 0, 0x10a4000, 2), -- 750
    (4 , 2, 5, 0, 0xffffffffc0a03020, 0xfebf0004, 4, 'out', 0x0f0f0f0f, 5000440000, 5000443000, 5000443700, 5000447700, 'ok', 0, 0x10a4000, 2), -- 700
    (5 , 2, 5, 0, 0xffffffffc0a03028, 0xfebf0004, 4, 'in',  0xf0f0f0e0, 5000450000, 5000453000, 5000453750, 5000457750, 'ok', 0, 0x10a4000, 2), -- 750
    (6 , 2, 5, 0, 0xffffffffc0a03040, 0xfebf0008, 4, 'out', 5, 5000460000, 5000463000, 5000463700, 5000467700, 'ok', 0, 0x10a4000, 2), -- 700
    (7 , 2, 5, 0, 0xffffffffc0a03050, 0xfebf0020, 4, 'in',  1, 5000470000, 5000473000, 5000473900, 5000477900, 'ok', 0, 0x10a4000, 2), -- 900
    (8 , 2, 5, 0, 0xffffffffc0a03050, 0xfebf0020, 4, 'in',  0, 5000480000, 5000483000, 5000483850, 5000487850, 'ok', 0, 0x10a4000, 2), -- 850
    (9 , 2, 5, 0, 0xffffffffc0a03060, 0xfebf0008, 4, 'in',  120, 5000490000, 5000493000, 5000493800, 5000497800, 'ok', 0, 0x10a4000, 2), -- 800
    (10, 2, 5, 0, 0xffffffffc0a03070, 0xfebf0080, 8, 'out', 0xfedcba9876543210, 5000500000, 5000503000, 5000504200, 5000508200, 'ok', 0, 0x10a4000, 2), -- 1200
    (11, 2, 5, 0, 0xffffffffc0a03078, 0xfebf0080, 8, 'in',  0xfedcba9876543210, 5000510000, 5000513000, 5000514100, 5000518100, 'ok', 0, 0x10a4000, 2); -- 1100
UPDATE sessions SET mmio_recorded = 11 WHERE id = 2;
