#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# busprof system test, guest side: two refused traps, then the example driver.
export PATH=/busprof/bin:$PATH
busprof-trap-probe 0x3e8 0x3ef    # the guest may use it, dom0's policy does not allow it
busprof-trap-probe 0x3f8 0x3ff    # the policy allows it, the guest was never granted it
busprof-example-driver -u 0x2f8 -n 100
