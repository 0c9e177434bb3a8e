/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The logic of busprof.ko that does not touch the hypervisor: argument
 * checks, the interface version check, and the retry and paging loops of
 * libbusprof (src/bp.c) over a hypercall, a clock and a sleep that the
 * caller supplies.  busprof.ko passes the busprof_op hypercall, ktime and
 * usleep_range; the unit test (tests/unit/kmod_core_test.cpp) passes a
 * scripted hypervisor and a fake clock.
 */
#ifndef BUSPROF_BP_CORE_H
#define BUSPROF_BP_CORE_H

#include <busprof/busprof_kernel.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How long bp_extract waits for the profiler in all (libbusprof's). */
#define BP_EXTRACT_DEADLINE_NS (30ull * 1000000000ull)
/* How long bp_pause/bp_resume wait for room in a full control ring. */
#define BP_PAUSE_DEADLINE_NS 1000000000ull

struct bp_env {
	/* One busprof_op hypercall: its result, 0 or a negative errno. */
	long (*op)(void *ctx, unsigned int cmd, void *arg);
	uint64_t (*now_ns)(void *ctx);
	void (*sleep_us)(void *ctx, unsigned int us);
	void *ctx;
	/* Xen's interface version (XEN_BUSPROF_version), 0: older than 1.2. */
	unsigned int xen_version;
};

/* 0, or -EINVAL if first > last or last > 0xffff. */
int bp_core_check_range(unsigned int first, unsigned int last);
/* 0, or -EINVAL unless [first, last] is whole pages below 2^52. */
int bp_core_check_span(uint64_t first, uint64_t last);
/* 0 if a provider of interface `have` serves a caller built for `want`. */
int bp_core_version_check(unsigned int have, unsigned int want);
/*
 * Xen's interface version: what XEN_BUSPROF_version returns, 0 for a Xen
 * older than 1.2 (which does not know it), -EPROTONOSUPPORT for another
 * major, or the hypercall's error.
 */
long bp_core_xen_version(const struct bp_env *e);
/* XEN_BUSPROF_start_trap or XEN_BUSPROF_stop_trap on [first, last]. */
int bp_core_trap(const struct bp_env *e, unsigned int cmd,
		 unsigned int first, unsigned int last);
/*
 * XEN_BUSPROF_start_trap_span or XEN_BUSPROF_stop_trap_span on the
 * memory-mapped pages [first, last]; -EOPNOTSUPP from a Xen older than 1.3,
 * which knows nothing of them.
 */
int bp_core_trap_span(const struct bp_env *e, unsigned int cmd,
		      uint64_t first, uint64_t last);
/* XEN_BUSPROF_pause or XEN_BUSPROF_resume, asked again while -EAGAIN. */
int bp_core_pause(const struct bp_env *e, unsigned int cmd);
/* bp_extract: the count, or a negative errno. */
ssize_t bp_core_extract(const struct bp_env *e, unsigned int first,
			unsigned int last, struct bp_record *buf, size_t cap,
			size_t *needed);
/* bp_extract_mmio: the count, or a negative errno. */
ssize_t bp_core_extract_mmio(const struct bp_env *e, uint64_t first,
			     uint64_t last, struct bp_record_wide *buf,
			     size_t cap, size_t *needed);

#ifdef __cplusplus
}
#endif

#endif /* BUSPROF_BP_CORE_H */
