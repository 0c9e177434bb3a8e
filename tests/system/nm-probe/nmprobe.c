// SPDX-License-Identifier: GPL-2.0-only
/*
 * nmprobe: does the CPU raise #NM for an FPU-state instruction while CR0.TS
 * is set?  Xen's lazy FPU switch relies on it: it sets CR0.TS for a vCPU
 * whose registers it has not loaded and loads them at the vCPU's first #NM.
 *
 * Runs each instruction once with CR0.TS set, inside kernel_fpu_begin() so
 * that no task's state is at stake.  Linux's #NM handler finds CR0.TS set,
 * warns ("CR0.TS was set"), clears it and lets the instruction run again;
 * so CR0.TS still set afterwards means the instruction ran without #NM.
 * Prints one line per instruction.  (Loaded once: busybox's insmod tries
 * again when a module's init fails, so it succeeds.)
 */
#include <linux/module.h>
#include <linux/kernel.h>
#include <asm/cpufeature.h>
#include <asm/fpu/api.h>
#include <asm/processor-flags.h>
#include <asm/special_insns.h>

static u8 area[4096] __aligned(64);

#define PROBE(name, insn)                                                   \
    do {                                                                    \
        unsigned long cr0;                                                  \
                                                                            \
        write_cr0(read_cr0() | X86_CR0_TS);                                 \
        asm volatile ( insn :: "D" (area), "a" (3), "d" (0) : "memory" );   \
        cr0 = read_cr0();                                                   \
        write_cr0(cr0 & ~X86_CR0_TS);                                       \
        pr_info("nmprobe: %s with CR0.TS set: %s\n", name,                  \
                (cr0 & X86_CR0_TS) ? "ran, no #NM" : "#NM");                \
    } while ( 0 )

static int __init nmprobe_init(void)
{
    if ( !boot_cpu_has(X86_FEATURE_XSAVE) )
    {
        pr_info("nmprobe: no XSAVE on this CPU\n");
        return -ENODEV;
    }
    kernel_fpu_begin();
    /* a valid XSAVE image of x87 and SSE for XRSTOR below */
    asm volatile ( "xsave (%%rdi)" :: "D" (area), "a" (3), "d" (0) : "memory" );
    PROBE("pxor", "pxor %%xmm0, %%xmm0");
    PROBE("fxsave", "fxsave (%%rdi)");
    PROBE("xsave", "xsave (%%rdi)");
    if ( boot_cpu_has(X86_FEATURE_XSAVEOPT) )
        PROBE("xsaveopt", "xsaveopt (%%rdi)");
    PROBE("xrstor", "xrstor (%%rdi)");
    kernel_fpu_end();
    return 0;
}

static void __exit nmprobe_exit(void)
{
}
module_init(nmprobe_init);
module_exit(nmprobe_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("busprof rig: #NM under CR0.TS for the FPU-state instructions");
