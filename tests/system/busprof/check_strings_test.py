#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""check_strings.py over a made-up run of porttest -s: it passes the run
whose rows are what porttest printed, and fails each doctored copy; and
pieces() gives QEMU's byte-wise view of wider rows."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_strings import STRING_ACCESSES, check_strings, pieces  # noqa: E402

LCR, MCR, IER = 0x03, 0x0B, 0x00
SIZES = {"b": (1, 16), "w": (2, 8), "l": (4, 4)}


def run(addr=0x4c6ffa, ins_echo=True):
    """(console log, rows (dir, port, size, value, rip)) of an agreeing run."""
    lines = [f"STRING-UART lcr 0x{LCR:02x} mcr 0x{MCR:02x} ier 0x{IER:02x}"]
    rows = [("in", 0x2FB, 1, LCR, 0x401000), ("in", 0x2FC, 1, MCR, 0x401004),
            ("in", 0x2F9, 1, IER, 0x401008), ("out", 0x2FB, 1, 3, 0x40100c),
            ("out", 0x2F9, 1, 0, 0x401010), ("out", 0x2FA, 1, 7, 0x401014),
            ("out", 0x2FC, 1, 0x10, 0x401018)]
    rip = 0x401100
    for w, (size, count) in SIZES.items():
        sent = [(0xA5 ^ i * 29) & 0xFF | (0x03010000 if size == 4 else 0) for i in range(count)]
        got = [v & 0xFF | (0x03C10000 if size == 4 else 0) for v in sent]
        if not ins_echo:
            got[1] ^= 1
        for kind, values in (("outs", sent), ("ins", got)):
            lines.append(f"STRING {kind}{w} port 0x2f8 count {count} at 0x{addr:x}: "
                         + " ".join(f"{v:0{2 * size}x}" for v in values))
            rows += [("in" if kind == "ins" else "out", 0x2F8, size, v, rip) for v in values]
            rip += 4
    rows += [("out", 0x2FC, 1, MCR, 0x401200), ("out", 0x2F9, 1, IER, 0x401204),
             ("out", 0x2FB, 1, LCR, 0x401208)]
    lines.append("STRING-OK 6 string instructions, each element read back")
    return "\n".join(lines) + "\n", rows


def main():
    log, rows = run()
    assert len(rows) == STRING_ACCESSES, len(rows)
    assert check_strings(rows, log) == [], check_strings(rows, log)
    first = 7                                   # the first element of the OUTSB
    doctored = {
        "an element missing": (log, rows[:first] + rows[first + 1:]),
        "an element more": (log, rows[:first] + [rows[first]] + rows[first:]),
        "two elements swapped": (log, rows[:first] + [rows[first + 1], rows[first]]
                                 + rows[first + 2:]),
        "a value changed": (log, rows[:first] + [rows[first][:3] + (0x13, rows[first][4])]
                            + rows[first + 1:]),
        "another width": (log, rows[:first] + [rows[first][:2] + (2,) + rows[first][3:]]
                          + rows[first + 1:]),
        "one element at another RIP": (log, rows[:first] + [rows[first][:4] + (0x401500,)]
                                       + rows[first + 1:]),
        "two instructions at one RIP": (log, [r[:4] + (0x401100,) if r[1] == 0x2F8 else r
                                              for r in rows]),
        "the restore missing": (log, rows[:-1]),
        "a buffer within one page": run(addr=0x4c6000),
        "an INS that read back another byte": run(ins_echo=False),
        "no STRING-OK": (log.replace("STRING-OK", "STRING-FAIL 1"), rows),
        "an instruction not printed": ("\n".join(line for line in log.splitlines()
                                                 if not line.startswith("STRING insw")),
                                       rows),
        "no STRING-UART": (log.replace("STRING-UART", "STRING-UARTX"), rows),
    }
    for what, (lg, rs) in doctored.items():
        assert check_strings(rs, lg), f"check_strings passed a doctored run: {what}"
    print(f"ok: check_strings passes the agreeing run, {len(doctored)} doctored ones fail")

    wide = [("out", 0x2F8, 4, 0x030100C3), ("in", 0x2F8, 2, 0x00A5), ("in", 0x2FF, 1, 7)]
    assert pieces(wide) == [("out", 0x2F8, 1, 0xC3), ("out", 0x2F9, 1, 0), ("out", 0x2FA, 1, 1),
                            ("out", 0x2FB, 1, 3), ("in", 0x2F8, 1, 0xA5), ("in", 0x2F9, 1, 0),
                            ("in", 0x2FF, 1, 7)], pieces(wide)
    print("ok: pieces() gives a wider row's bytes, lowest port first")


if __name__ == "__main__":
    main()
