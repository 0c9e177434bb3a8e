// SPDX-License-Identifier: GPL-2.0-only
/*
 * busprof.ko: the busprof guest API for Linux kernel drivers in a Xen
 * guest (include/busprof/busprof_kernel.h).  The module issues the
 * busprof_op hypercall itself, from kernel mode: no privcmd, no ioperm.
 *
 * The hypercall goes through Linux's own _hypercall2() of
 * <asm/xen/hypercall.h>: a call of the xen_hypercall static call's
 * trampoline, which the kernel exports to modules (since the XSA-466 fix,
 * which replaced the hypercall page) and points at VMCALL or VMMCALL for
 * PVH and HVM guests and at the PV entry for PV guests.  Xen copies the
 * arguments from and the records to the guest's linear addresses, which
 * kernel memory always maps, so nothing needs pinning as it does in user
 * space.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <xen/xen.h>
#include <asm/xen/hypercall.h>

#include <busprof.h>	/* xen-patches/xen/include/public */

#include "bp_core.h"

static long busprof_op(void *ctx, unsigned int cmd, void *arg)
{
	return _hypercall2(long, busprof_op, cmd, arg);
}

static uint64_t busprof_now_ns(void *ctx)
{
	return ktime_get_ns();
}

static void busprof_sleep_us(void *ctx, unsigned int us)
{
	usleep_range(us, 2 * us);
}

/* xen_version is set once, at load, before any export can be called. */
static struct bp_env busprof_xen __ro_after_init = {
	.op = busprof_op,
	.now_ns = busprof_now_ns,
	.sleep_us = busprof_sleep_us,
};

int bp_interface_check(unsigned int version)
{
	return bp_core_version_check(XEN_BUSPROF_INTERFACE_VERSION, version);
}
EXPORT_SYMBOL_GPL(bp_interface_check);

int bp_start_trap(unsigned int first, unsigned int last)
{
	return bp_core_trap(&busprof_xen, XEN_BUSPROF_start_trap, first, last);
}
EXPORT_SYMBOL_GPL(bp_start_trap);

int bp_stop_trap(unsigned int first, unsigned int last)
{
	return bp_core_trap(&busprof_xen, XEN_BUSPROF_stop_trap, first, last);
}
EXPORT_SYMBOL_GPL(bp_stop_trap);

int bp_pause(void)
{
	might_sleep();
	return bp_core_pause(&busprof_xen, XEN_BUSPROF_pause);
}
EXPORT_SYMBOL_GPL(bp_pause);

int bp_resume(void)
{
	might_sleep();
	return bp_core_pause(&busprof_xen, XEN_BUSPROF_resume);
}
EXPORT_SYMBOL_GPL(bp_resume);

ssize_t bp_extract(unsigned int first, unsigned int last,
		   struct bp_record *buf, size_t cap, size_t *needed)
{
	might_sleep();
	return bp_core_extract(&busprof_xen, first, last, buf, cap, needed);
}
EXPORT_SYMBOL_GPL(bp_extract);

int bp_start_trap_mmio(phys_addr_t first, phys_addr_t last)
{
	return bp_core_trap_span(&busprof_xen, XEN_BUSPROF_start_trap_span,
				 first, last);
}
EXPORT_SYMBOL_GPL(bp_start_trap_mmio);

int bp_stop_trap_mmio(phys_addr_t first, phys_addr_t last)
{
	return bp_core_trap_span(&busprof_xen, XEN_BUSPROF_stop_trap_span,
				 first, last);
}
EXPORT_SYMBOL_GPL(bp_stop_trap_mmio);

ssize_t bp_extract_mmio(phys_addr_t first, phys_addr_t last,
			struct bp_record_wide *buf, size_t cap, size_t *needed)
{
	might_sleep();
	return bp_core_extract_mmio(&busprof_xen, first, last, buf, cap,
				    needed);
}
EXPORT_SYMBOL_GPL(bp_extract_mmio);

static int __init busprof_init(void)
{
	long v;

	/* Off Xen the hypercall instruction would fault. */
	if (!xen_domain())
		return -ENODEV;
	v = bp_core_xen_version(&busprof_xen);
	if (v == -EPROTONOSUPPORT) {
		pr_err("this Xen speaks another major version of the busprof interface than %u.%u\n",
		       XEN_BUSPROF_INTERFACE_VERSION >> 16,
		       XEN_BUSPROF_INTERFACE_VERSION & 0xffff);
		return -EPROTONOSUPPORT;
	}
	/* Another error (-ENOSYS: a Xen without busprof) shows at the first
	 * call, with its own errno, as before 1.2. */
	busprof_xen.xen_version = v > 0 ? (unsigned int)v : 0;
	pr_info("interface %u.%u, Xen's %u.%u, %s guest\n",
		XEN_BUSPROF_INTERFACE_VERSION >> 16,
		XEN_BUSPROF_INTERFACE_VERSION & 0xffff,
		busprof_xen.xen_version >> 16, busprof_xen.xen_version & 0xffff,
		xen_pvh_domain() ? "PVH" : xen_hvm_domain() ? "HVM" : "PV");
	return 0;
}

static void __exit busprof_exit(void)
{
}

module_init(busprof_init);
module_exit(busprof_exit);
MODULE_DESCRIPTION("busprof: code-based bus profiling for drivers in a Xen guest");
MODULE_LICENSE("GPL");
