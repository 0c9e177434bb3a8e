// SPDX-License-Identifier: GPL-2.0-only
/*
 * busprof-kexample.ko: the example driver of guest-lib/examples, as a
 * kernel module.  At load it drives the scratch register of a 16550 UART
 * (COM2 by default) with plain outb/inb between bp_start_trap and
 * bp_stop_trap, checks every value it reads back, extracts its records and
 * checks them against the accesses it made (count, ports, values, RIPs in
 * its own text).  It prints one line, "busprof-kexample: OK ..." or
 * "busprof-kexample: FAIL ...", and stays loaded only on success, so that
 * insmod's exit status is the result.  After OK, a DIGEST line: the
 * records' digests (kex_digests), for a check against the trace DB.
 *
 * With edu=ADDR (the guest-physical address of BAR0 of QEMU's edu device,
 * as pci_resource_start gives it) it then does the same on memory-mapped
 * registers: the BAR's first page under bp_start_trap_mmio, the ID read,
 * liveness writes each read back inverted, a factorial polled on the
 * status register's busy bit and an 8-byte write and read, checked against
 * bp_extract_mmio's records; while the page is trapped, it checks what Xen
 * must refuse (kex_refusals).
 *
 * With timed=N it also times N reads of the ID register trapped, N direct
 * after the stop, N of the BAR's second page (never trapped) and (an HVM
 * guest) N reads of memory qemu-xen's platform device emulates, and prints
 * their p50 and p99 (MMIO-COST).  With trap=0 as well it calls no busprof
 * function at all: it times only the untrapped reads, the same way, for
 * the comparison run on a Xen without busprof (MMIO-COST with "trapped -").
 *
 * Parameters: base=0x2f8 (UART base port), iterations=100 (0: no port
 * phase, with edu only), edu=0 (none), timed=0, trap=1, ropage=0 (none).
 */
#define pr_fmt(fmt) "busprof-kexample: " fmt

#include <linux/io.h>
#include <linux/ioport.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include <busprof/busprof_kernel.h>

#include "kexample_check.h"

#define UART_LSR 5
#define UART_SCR 7

static unsigned int base = 0x2f8;
module_param(base, uint, 0444);
MODULE_PARM_DESC(base, "UART base port (the scratch register is base + 7)");
static unsigned int iterations = 100;
module_param(iterations, uint, 0444);
MODULE_PARM_DESC(iterations, "write/read/status rounds (0: only the edu device's phase)");
static unsigned long edu;
module_param(edu, ulong, 0444);
MODULE_PARM_DESC(edu, "guest-physical address of the edu device's BAR0 (0: no memory-mapped phase)");

static unsigned int timed;
module_param(timed, uint, 0444);
MODULE_PARM_DESC(timed, "edu phase: reads timed of each kind (trapped, direct, device model) for the cost line (0: none)");

static unsigned long ropage;
module_param(ropage, ulong, 0444);
MODULE_PARM_DESC(ropage, "edu phase: a page the domain has with iomem= that Xen keeps read-only, which it must refuse to trap with EXDEV (0: none)");
static bool trap = true;
module_param(trap, bool, 0444);
MODULE_PARM_DESC(trap, "edu phase: 0 times the untrapped reads only, without busprof (needs timed)");

/* QEMU's edu device (docs/specs/edu.rst): its registers in BAR0. */
#define EDU_ID		0x00
#define EDU_LIVENESS	0x04
#define EDU_FACTORIAL	0x08
#define EDU_STATUS	0x20
#define EDU_SCRATCH	0x80	/* the DMA source address: 8 bytes, any value */
#define EDU_BUSY	0x01
#define EDU_ID_VALUE	0x010000ed
/* Room for the accesses of the memory-mapped phase, polls and timed reads included. */
#define KEX_MMIO_MAX	8192
#define KEX_TIMED_MAX	2048
/* qemu-xen's platform device of an HVM guest: BAR1 is memory it emulates;
 * Linux maps grant frames at its start, so the timed reads go further in. */
#define XEN_PLATFORM_VENDOR	0x5853
#define XEN_PLATFORM_DEVICE	0x0001
#define XEN_PLATFORM_PROBE	0x800000

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

/* The memory-mapped accesses made so far, for the check. */
struct kex_mmio_log {
	struct kex_mmio_access *a;
	size_t n;
};

static void kex_note(struct kex_mmio_log *log, u8 dir, u8 size,
		     unsigned int off, u8 check, u64 value)
{
	if (log->n < KEX_MMIO_MAX)
		log->a[log->n] = (struct kex_mmio_access){ edu + off, dir,
							    size, check,
							    value };
	log->n++;
}

/*
 * The code under test on the edu device: plain readl/writel/readq/writeq
 * through the driver's ioremap.  Returns what read back wrong, or NULL.
 */
static noinline const char *kex_drive_mmio(void __iomem *regs,
					   struct kex_mmio_log *log)
{
	const u64 wide = 0x0123456789abcdefull;
	unsigned int i, polls = 0;
	u32 v;
	u64 w;

	v = readl(regs + EDU_ID);
	kex_note(log, BP_DIR_IN, 4, EDU_ID, 1, v);
	if (v != EDU_ID_VALUE)
		return "the ID register is not the edu device's";
	for (i = 0; i < 8; i++) {
		u32 x = 0x5a5a0000u + i * 0x111u;

		writel(x, regs + EDU_LIVENESS);
		kex_note(log, BP_DIR_OUT, 4, EDU_LIVENESS, 1, x);
		v = readl(regs + EDU_LIVENESS);
		kex_note(log, BP_DIR_IN, 4, EDU_LIVENESS, 1, v);
		if (v != ~x)
			return "liveness did not read back inverted";
	}
	writel(5, regs + EDU_FACTORIAL);
	kex_note(log, BP_DIR_OUT, 4, EDU_FACTORIAL, 1, 5);
	do {
		v = readl(regs + EDU_STATUS);
		kex_note(log, BP_DIR_IN, 4, EDU_STATUS, 1, v);
	} while ((v & EDU_BUSY) && ++polls < KEX_MMIO_MAX / 2);
	if (v & EDU_BUSY)
		return "the factorial stayed busy";
	v = readl(regs + EDU_FACTORIAL);
	kex_note(log, BP_DIR_IN, 4, EDU_FACTORIAL, 1, v);
	if (v != 120)
		return "5! did not read 120";
	writeq(wide, regs + EDU_SCRATCH);
	kex_note(log, BP_DIR_OUT, 8, EDU_SCRATCH, 1, wide);
	w = readq(regs + EDU_SCRATCH);
	kex_note(log, BP_DIR_IN, 8, EDU_SCRATCH, 1, w);
	if (w != wide)
		return "the 8-byte register did not read back";
	return NULL;
}

static int kex_cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* The nearest-rank percentile q (in percent) of ns[0..n), sorted here. */
static u64 kex_pct(u64 *ns, unsigned int n, unsigned int q)
{
	unsigned int rank = (q * n + 99) / 100;

	sort(ns, n, sizeof(*ns), kex_cmp_u64, NULL);
	return n ? ns[rank ? rank - 1 : 0] : 0;
}

/*
 * timed 32-bit reads at regs + off, each timed on its own (ktime, ns);
 * p50 and p99 into p[0], p[1].  log: note each, for a trapped page.
 */
static noinline void kex_time_reads(void __iomem *regs, unsigned int off,
				    u64 *ns, u64 *p, struct kex_mmio_log *log)
{
	unsigned int i;

	for (i = 0; i < timed; i++) {
		u64 t0 = ktime_get_ns();
		u32 v = readl(regs + off);

		ns[i] = ktime_get_ns() - t0;
		if (log)
			kex_note(log, BP_DIR_IN, 4, off, 1, v);
	}
	p[0] = kex_pct(ns, timed, 50);
	p[1] = kex_pct(ns, timed, 99);
}

/* The untrapped reads of the cost line, p50 and p99 of each kind. */
struct kex_cost {
	u64 direct[2], other[2], dm[2];
	int dm_found;
};

static int kex_time_device_model(u64 *ns, u64 *p);

/*
 * The reads after any trap: the ID register (its page mapped again after
 * the trap, or never trapped), the BAR's second page, which nothing ever
 * traps (the device answers all ones there), and memory the device model
 * emulates.
 */
static void kex_time_direct(void __iomem *regs, u64 *ns, struct kex_cost *c)
{
	kex_time_reads(regs, EDU_ID, ns, c->direct, NULL);
	kex_time_reads(regs, PAGE_SIZE, ns, c->other, NULL);
	c->dm_found = kex_time_device_model(ns, c->dm);
}

/* trapped: p50 and p99 of the trapped reads, NULL if there were none. */
static void kex_print_cost(const u64 *trapped, const struct kex_cost *c)
{
	char t[48] = "-", dm[48] = "-";

	if (trapped)
		scnprintf(t, sizeof(t), "%llu/%llu", trapped[0], trapped[1]);
	if (c->dm_found)
		scnprintf(dm, sizeof(dm), "%llu/%llu", c->dm[0], c->dm[1]);
	pr_info("MMIO-COST %u reads each, ns p50/p99: trapped %s direct %llu/%llu other-page %llu/%llu device-model %s\n",
		timed, t, c->direct[0], c->direct[1], c->other[0], c->other[1],
		dm);
}

/*
 * The same reads of memory qemu-xen emulates (an HVM guest's platform
 * device, BAR1): what a driver pays without busprof for an access a device
 * model serves.  0 if there is none (a PVH guest).
 */
static int kex_time_device_model(u64 *ns, u64 *p)
{
	struct pci_dev *pdev = pci_get_device(XEN_PLATFORM_VENDOR,
					      XEN_PLATFORM_DEVICE, NULL);
	void __iomem *regs;
	int found = 0;

	if (!pdev)
		return 0;
	if ((pci_resource_flags(pdev, 1) & IORESOURCE_MEM) &&
	    pci_resource_len(pdev, 1) > XEN_PLATFORM_PROBE) {
		regs = ioremap(pci_resource_start(pdev, 1) + XEN_PLATFORM_PROBE,
			       PAGE_SIZE);
		if (regs) {
			kex_time_reads(regs, 0, ns, p, NULL);
			iounmap(regs);
			found = 1;
		}
	}
	pci_dev_put(pdev);
	return found;
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
	case EXDEV: return "EXDEV";
	default: return "E?";
	}
}

/*
 * The records' digests (kex_digests), for a check against the trace DB:
 * "DIGEST WHAT: N records, fnv1a-64 per 1024: 0x... ...", the first
 * KEX_DIGESTS_MAX blocks (N says how many records they cover).
 */
#define KEX_DIGESTS_MAX 16
static void kex_print_digests(const char *what, const struct bp_record *recs,
			      size_t n)
{
	uint64_t d[KEX_DIGESTS_MAX];
	char line[KEX_DIGESTS_MAX * 19 + 1];
	size_t i, blocks = kex_digests(recs, n, d, KEX_DIGESTS_MAX), len = 0;

	line[0] = 0;
	for (i = 0; i < blocks; i++)
		len += scnprintf(line + len, sizeof(line) - len, " 0x%016llx",
				 (unsigned long long)d[i]);
	pr_info("DIGEST %s: %zu records, fnv1a-64 per %d:%s\n", what,
		min_t(size_t, n, KEX_DIGESTS_MAX * KEX_DIGEST_BLOCK),
		KEX_DIGEST_BLOCK, line);
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
	kex_print_digests("port", recs, n);
out:
	kvfree(recs);
	kfree(want);
	return rc;
}

/*
 * What Xen must refuse while the BAR's first page is trapped, each with its
 * own errno: the same page again and a span overlapping it (-EEXIST), a
 * page of the BAR that the domain's iomem= gives it but dom0's policy
 * leaves out (-EPERM, the policy's check; the rig allows BAR..BAR+0x7ffff),
 * the page after the BAR, which dom0's policy allows but iomem= does not
 * give (-EPERM, the iomem check), and a stop of a span never started
 * (-ENOENT); and what the module refuses before Xen, a span not of whole
 * pages (-EINVAL).  With ropage=ADDR, last, a page the domain has with
 * iomem= and dom0's policy allows, but which Xen keeps read-only (an MSI-X
 * table, PCI configuration space) and so never maps directly (-EXDEV).  A
 * call that was not refused is undone.  0, or -EBADMSG with the FAIL line
 * printed; said gets the errnos, in order.
 */
static int kex_refusals(phys_addr_t first, char *said, size_t len)
{
	static const struct {
		u64 first, last;	/* offsets from the trapped page */
		int stop, want;
	} calls[] = {
		{ 0, PAGE_SIZE - 1, 0, -EEXIST },
		{ 0, 2 * PAGE_SIZE - 1, 0, -EEXIST },
		{ 0x80000, 0x80000 + PAGE_SIZE - 1, 0, -EPERM },
		{ 0x100000, 0x100000 + PAGE_SIZE - 1, 0, -EPERM },
		{ PAGE_SIZE, 2 * PAGE_SIZE - 1, 1, -ENOENT },
		{ 0, 0x7ff, 0, -EINVAL },
		{ 0, PAGE_SIZE - 1, 0, -EXDEV },	/* at ropage, not first */
	};
	size_t i, off = 0, n = ARRAY_SIZE(calls) - !ropage;

	for (i = 0; i < n; i++) {
		phys_addr_t base = calls[i].want == -EXDEV ? ropage : first;
		phys_addr_t a = base + calls[i].first;
		phys_addr_t b = base + calls[i].last;
		int rc = calls[i].stop ? bp_stop_trap_mmio(a, b) :
					 bp_start_trap_mmio(a, b);

		if (!rc && !calls[i].stop)
			bp_stop_trap_mmio(a, b);
		if (rc != calls[i].want) {
			pr_err("FAIL %s 0x%llx-0x%llx: %d (%s), not %s\n",
			       calls[i].stop ? "bp_stop_trap_mmio" :
			       "bp_start_trap_mmio", (u64)a, (u64)b, rc,
			       kex_errname(rc), kex_errname(calls[i].want));
			return -EBADMSG;
		}
		off += scnprintf(said + off, len - off, "%s%s", i ? " " : "",
				 kex_errname(rc));
	}
	return 0;
}

/*
 * trap=0: the reads kex_run_mmio times after its trap (the ID register, the
 * BAR's second page, memory the device model emulates), with no trap before.
 */
static int kex_time_untrapped(void)
{
	struct kex_cost cost;
	void __iomem *regs;
	int rc = 0;
	u64 *ns;
	u32 id;

	regs = ioremap(edu, 2 * PAGE_SIZE);
	ns = kvcalloc(timed, sizeof(*ns), GFP_KERNEL);
	if (!regs || !ns) {
		pr_err("FAIL no mapping or memory for the edu device at 0x%lx\n",
		       edu);
		rc = -ENOMEM;
		goto out;
	}
	/* Only the device answers this: the reads reach it. */
	id = readl(regs + EDU_ID);
	if (id != EDU_ID_VALUE) {
		pr_err("FAIL edu device at 0x%lx: ID 0x%08x, not 0x%08x\n", edu,
		       id, EDU_ID_VALUE);
		rc = -EIO;
		goto out;
	}
	kex_time_direct(regs, ns, &cost);
	pr_info("OK %u untrapped reads of the edu device at 0x%lx timed, no busprof call\n",
		timed, edu);
	kex_print_cost(NULL, &cost);
out:
	kvfree(ns);
	if (regs)
		iounmap(regs);
	return rc;
}

/* The memory-mapped phase: the edu device's first page under a trap. */
static int kex_run_mmio(u64 text_lo, u64 text_hi)
{
	phys_addr_t first = edu, last = edu + PAGE_SIZE - 1;
	struct kex_mmio_log log = { NULL, 0 };
	struct bp_record_wide *recs = NULL;
	void __iomem *regs;
	struct kex_result res;
	size_t needed = 0, before = 0;
	u64 trapped[2], *ns = NULL;
	struct kex_cost cost;
	char refused[64] = "";
	const char *bad;
	ssize_t n;
	int rc;

	if (timed > KEX_TIMED_MAX) {
		pr_err("FAIL timed=%u: at most %u\n", timed, KEX_TIMED_MAX);
		return -EINVAL;
	}
	/* The first page is trapped, the second never is (kex_time_direct). */
	regs = ioremap(edu, 2 * PAGE_SIZE);
	log.a = kvcalloc(KEX_MMIO_MAX, sizeof(*log.a), GFP_KERNEL);
	ns = kvcalloc(timed ? timed : 1, sizeof(*ns), GFP_KERNEL);
	if (!regs || !log.a || !ns) {
		pr_err("FAIL no mapping or memory for the edu device at 0x%lx\n",
		       edu);
		rc = -ENOMEM;
		goto out;
	}
	/*
	 * The session may hold records of the page from before this run (a
	 * program's, on the same device): they come first in the extract.
	 * Counted now, and this run's are the ones after them.
	 */
	n = bp_extract_mmio(first, last, NULL, 0, &before);
	if (n < 0 && n != -ENOBUFS) {
		pr_err("FAIL bp_extract_mmio 0x%llx-0x%llx before the trap: %zd (%s)\n",
		       (u64)first, (u64)last, n, kex_errname(n));
		rc = n;
		goto out;
	}
	rc = bp_start_trap_mmio(first, last);
	if (rc) {
		pr_err("FAIL bp_start_trap_mmio 0x%llx-0x%llx: %d (%s)\n",
		       (u64)first, (u64)last, rc, kex_errname(rc));
		goto out;
	}
	rc = kex_refusals(first, refused, sizeof(refused));
	if (rc) {
		bp_stop_trap_mmio(first, last);
		goto out;
	}
	bad = kex_drive_mmio(regs, &log);
	if (!bad && timed)
		kex_time_reads(regs, EDU_ID, ns, trapped, &log);
	rc = bp_stop_trap_mmio(first, last);
	if (rc) {
		pr_err("FAIL bp_stop_trap_mmio 0x%llx-0x%llx: %d (%s)\n",
		       (u64)first, (u64)last, rc, kex_errname(rc));
		goto out;
	}
	if (bad) {
		pr_err("FAIL edu device: %s\n", bad);
		rc = -EIO;
		goto out;
	}
	if (timed)
		kex_time_direct(regs, ns, &cost);

	recs = kvcalloc(before + log.n, sizeof(*recs), GFP_KERNEL);
	n = recs ? bp_extract_mmio(first, last, recs, before + log.n, &needed) :
		   -ENOMEM;
	if (n == -ENOBUFS) {
		pr_err("FAIL bp_extract_mmio: %zu records for %zu earlier and %zu accesses\n",
		       needed, before, log.n);
		rc = -EBADMSG;
		goto out;
	}
	if (n < 0) {
		pr_err("FAIL bp_extract_mmio 0x%llx-0x%llx: %zd (%s)\n",
		       (u64)first, (u64)last, n, kex_errname(n));
		rc = n;
		goto out;
	}
	if ((size_t)n < before) {
		pr_err("FAIL bp_extract_mmio: %zd records, fewer than the %zu before the trap\n",
		       n, before);
		rc = -EBADMSG;
		goto out;
	}
	n -= before;
	rc = kex_check_wide(recs + before, n, log.a, log.n, text_lo, text_hi,
			    &res);
	if (rc) {
		pr_err("FAIL %zd memory-mapped records for %zu accesses: record %zu: %s\n",
		       n, log.n, res.bad, res.why);
		goto out;
	}
	pr_info("OK %zd memory-mapped transactions extracted, %zu accesses made, 0x%llx-0x%llx, rip 0x%llx-0x%llx in module text, %zu clock-skewed, %zu earlier records of the page skipped, refused: %s\n",
		n, log.n, (u64)first, (u64)last, res.rip_min, res.rip_max,
		res.skewed, before, refused);
	if (timed)
		kex_print_cost(trapped, &cost);
out:
	kvfree(ns);
	kvfree(recs);
	kvfree(log.a);
	if (regs)
		iounmap(regs);
	return rc;
}

static int __init kex_init(void)
{
	int rc = 0;

	if ((!iterations && !edu) || base > 0xfff8 || edu % PAGE_SIZE ||
	    ropage % PAGE_SIZE ||
	    (!trap && (iterations || !edu || !timed || timed > KEX_TIMED_MAX))) {
		pr_err("FAIL bad parameters base=0x%x iterations=%u edu=0x%lx timed=%u trap=%d\n",
		       base, iterations, edu, timed, trap);
		return -EINVAL;
	}
	if (!trap)
		return kex_time_untrapped();
	if (iterations) {
		/* The UART is ours while we drive it; the serial driver must
		 * not have claimed it (HVM guests: 8250.nr_uarts=1). */
		if (!request_region(base, 8, KBUILD_MODNAME)) {
			pr_err("FAIL ports 0x%x-0x%x are in use by another driver\n",
			       base, base + 7);
			return -EBUSY;
		}
		rc = kex_run();
		release_region(base, 8);
		if (rc)
			return rc;
	}
	if (edu)
		rc = kex_run_mmio((unsigned long)THIS_MODULE->core_layout.base,
				  (unsigned long)THIS_MODULE->core_layout.base +
				  THIS_MODULE->core_layout.text_size);
	return rc;
}

static void __exit kex_exit(void)
{
}

module_init(kex_init);
module_exit(kex_exit);
MODULE_DESCRIPTION("busprof example driver: a 16550 scratch register under busprof");
MODULE_LICENSE("GPL");
