#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""classify.py --retryable: which failed system-test runs may be booted again.
Each case is a run directory written here the way the rig writes one."""
import os
import subprocess
import sys
import tempfile
import unittest

CLASSIFY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "classify.py")
BOOT = "[t=10.00] guest bp-hvm (hvm): xl create -p /busprof/cfg/hvm.cfg\n"


def run_dir(root, serial="", summary=None, stall=False, qemu_status="1", status=None):
    d = tempfile.mkdtemp(dir=root)
    os.makedirs(os.path.join(d, "results"))
    with open(os.path.join(d, "serial.log"), "w") as f:
        f.write(BOOT + serial)
    if summary is not None:
        with open(os.path.join(d, "results", "summary.txt"), "w") as f:
            f.write(summary)
    if status is not None:
        with open(os.path.join(d, "results", "status.txt"), "w") as f:
            f.write(status)
    if stall:
        open(os.path.join(d, "qemu-registers.txt"), "w").close()
    with open(os.path.join(d, "qemu-status"), "w") as f:
        f.write(qemu_status)
    return d


def retryable(d):
    p = subprocess.run([sys.executable, CLASSIFY, "--retryable", d],
                       capture_output=True, text=True)
    return p.returncode, p.stdout


class Retryable(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def assertDecision(self, d, retried, cause):
        """classify.py --retryable on d retries it (or not) and names cause."""
        rc, out = retryable(d)
        self.assertEqual(rc, 0 if retried else 1, out)
        self.assertIn(cause, out)

    def test_a_passed_run_is_not_retried(self):
        d = run_dir(self.root, summary="PASS bp-hvm type=hvm 40s: DRIVER OK\n",
                    status="result=0\n")
        self.assertDecision(d, False, "passed")

    def test_a_hang_alone_is_retried(self):
        d = run_dir(self.root, stall=True, qemu_status="124")
        self.assertDecision(d, True, "stall")

    def test_a_hang_after_xl_crashes_is_retried(self):
        d = run_dir(self.root, serial="[t=20.00] EVENT xl-crash cmd=domid name=bp-hvm status=139\n",
                    stall=True, qemu_status="124")
        self.assertDecision(d, True, "xl-crash")

    def test_a_hang_with_the_daemon_dead_is_not_retried(self):
        d = run_dir(self.root, serial="busprof[453]: segfault at 7fdc7f96a0f8 ip 00007f00 "
                    "sp 00007ffe error 4 in libc.so.6\n", stall=True, qemu_status="124")
        self.assertDecision(d, False, "daemon-segv")

    def test_a_hang_after_the_daemon_aborted_is_not_retried(self):
        # dom0 never wrote its results: only its console says the daemon died
        d = run_dir(self.root, serial="malloc(): unsorted double linked list corrupted\n"
                    "[t=364.48] daemon for bp-pvh exited with 134\n"
                    "[t=20.00] EVENT xl-crash cmd=domid name=bp-pvh status=134\n",
                    stall=True, qemu_status="124")
        self.assertDecision(d, False, "daemon-segv")

    def test_stamps_out_of_order_are_not_retried(self):
        d = run_dir(self.root, serial="[t=20.00] EVENT xl-crash cmd=domid name=bp-hvm status=134\n"
                    "EXTRACT bp-hvm 300 records, 12 out of order\n",
                    summary="FAIL bp-hvm type=hvm 40s: stamps out of order\n",
                    status="result=1\n", qemu_status="3")
        self.assertDecision(d, False, "stamp-order")

    def test_a_guest_that_failed_for_its_own_reasons_is_not_retried(self):
        d = run_dir(self.root, summary="FAIL bp-hvm type=hvm 40s: DRIVER FAILED\n",
                    status="result=1\n", qemu_status="3")
        self.assertDecision(d, False, "guest-fail")


if __name__ == "__main__":
    unittest.main()
