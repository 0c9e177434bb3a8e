// SPDX-License-Identifier: GPL-2.0-only
/*
 * busprof-kexample.ko: the example driver of guest-lib/examples, as a
 * kernel module.  At load it drives the scratch register of a 16550 UART
 * (COM2 by default) with plain outb/inb between bp_start_trap and
 * bp_stop_trap, checks every value it reads back, extracts its records and
 * checks them against the accesses it made (count, ports, values, RIPs in
 * its own text).  It prints one line, "busprof-kexample: OK ..." or
 * "busprof-kexample: FAIL ...", and stays loaded only on success, so that
 * insmod's exit status is the result.
 *
 * Parameters: base=0x2f8 (UART base port), iterations=100.
 */
#define pr_fmt(fmt) "busprof-kexample: " fmt

#include <linux/io.h>
#include <linux/ioport.h>
#include <linux/module.h>
#include <linux/slab.h>

#include <busprof/busprof_kernel.h>

#include "kexample_check.h"

#define UART_LSR 5
#define UART_SCR 7

static unsigned int base = 0x2f8;
module_param(base, uint, 0444);
MODULE_PARM_DESC(base, "UART base port (the scratch register is base + 7)");
static unsigned int iterations = 100;
module_param(iterations, uint, 0444);
MODULE_PARM_DESC(iterations, "write/read/status rounds");

/*
 * The code under test: plain port instructions.  Not __init, so that its
 * RIPs lie in the module's core text, which stays mapped for the check.
 * Returns the number of values that did not read back.
 */
static noinline unsigned int kex_drive(struct kex_access *want)
{
	unsigned int i, mismatches = 0;

	for (i = 0; i < iterations; i++) {
		u8 v = (u8)(i * 37 + 11), r;

		outb(v, base + UART_SCR);
		r = inb(base + UART_SCR);
		if (r != v)
			mismatches++;
		(void)inb(base + UART_LSR);
		want[3 * i] = (struct kex_access){ base + UART_SCR, BP_DIR_OUT,
						   1, v };
		want[3 * i + 1] = (struct kex_access){ base + UART_SCR,
						       BP_DIR_IN, 1, v };
		want[3 * i + 2] = (struct kex_access){ base + UART_LSR,
						       BP_DIR_IN, 0, 0 };
	}
	return mismatches;
}

static const char *kex_errname(int rc)
{
	switch (-rc) {
	case EPERM: return "EPERM";
	case EINVAL: return "EINVAL";
	case EEXIST: return "EEXIST";
	case ENOENT: return "ENOENT";
	case ENXIO: return "ENXIO";
	case ENOSPC: return "ENOSPC";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOSYS: return "ENOSYS";
	case ENOBUFS: return "ENOBUFS";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EIO: return "EIO";
	case EBUSY: return "EBUSY";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	default: return "E?";
	}
}

static int kex_run(void)
{
	unsigned int first = base, last = base + 7, mismatches;
	size_t nwant = 3 * (size_t)iterations, needed = 0;
	u64 text_lo = (unsigned long)THIS_MODULE->core_layout.base;
	u64 text_hi = text_lo + THIS_MODULE->core_layout.text_size;
	struct kex_access *want;
	struct bp_record *recs = NULL;
	struct kex_result res;
	ssize_t n;
	int rc;

	rc = bp_check_version();
	if (rc) {
		pr_err("FAIL busprof.ko does not provide interface 0x%x: %d (%s)\n",
		       BP_INTERFACE_VERSION, rc, kex_errname(rc));
		return rc;
	}
	want = kcalloc(nwant ? nwant : 1, sizeof(*want), GFP_KERNEL);
	if (!want)
		return -ENOMEM;

	rc = bp_start_trap(first, last);
	if (rc) {
		pr_err("FAIL bp_start_trap 0x%x-0x%x: %d (%s)\n", first, last,
		       rc, kex_errname(rc));
		goto out;
	}
	mismatches = kex_drive(want);
	rc = bp_stop_trap(first, last);
	if (rc) {
		pr_err("FAIL bp_stop_trap 0x%x-0x%x: %d (%s)\n", first, last,
		       rc, kex_errname(rc));
		goto out;
	}
	if (mismatches) {
		pr_err("FAIL %u of %u scratch values did not read back\n",
		       mismatches, iterations);
		rc = -EIO;
		goto out;
	}

	/* One record of room first: the API says how many there are. */
	recs = kvcalloc(1, sizeof(*recs), GFP_KERNEL);
	n = recs ? bp_extract(first, last, recs, 1, &needed) : -ENOMEM;
	if (n == -ENOBUFS) {
		kvfree(recs);
		recs = kvcalloc(needed, sizeof(*recs), GFP_KERNEL);
		n = recs ? bp_extract(first, last, recs, needed, NULL) :
			   -ENOMEM;
	}
	if (n < 0) {
		pr_err("FAIL bp_extract 0x%x-0x%x: %zd (%s)\n", first, last, n,
		       kex_errname(n));
		rc = n;
		goto out;
	}

	rc = kex_check_records(recs, n, want, nwant, text_lo, text_hi, &res);
	if (rc) {
		pr_err("FAIL %zd records for %zu accesses: record %zu: %s\n",
		       n, nwant, res.bad, res.why);
		goto out;
	}
	pr_info("OK %zd transactions extracted, %zu accesses made, ports 0x%x-0x%x, rip 0x%llx-0x%llx in module text 0x%llx-0x%llx, %zu clock-skewed\n",
		n, nwant, first, last, res.rip_min, res.rip_max, text_lo,
		text_hi, res.skewed);
out:
	kvfree(recs);
	kfree(want);
	return rc;
}

static int __init kex_init(void)
{
	int rc;

	if (!iterations || base > 0xfff8) {
		pr_err("FAIL bad parameters base=0x%x iterations=%u\n", base,
		       iterations);
		return -EINVAL;
	}
	/* The UART is ours while we drive it; the serial driver must not
	 * have claimed it (HVM guests: 8250.nr_uarts=1). */
	if (!request_region(base, 8, KBUILD_MODNAME)) {
		pr_err("FAIL ports 0x%x-0x%x are in use by another driver\n",
		       base, base + 7);
		return -EBUSY;
	}
	rc = kex_run();
	release_region(base, 8);
	return rc;
}

static void __exit kex_exit(void)
{
}

module_init(kex_init);
module_exit(kex_exit);
MODULE_DESCRIPTION("busprof example driver: a 16550 scratch register under busprof");
MODULE_LICENSE("GPL");
