// SPDX-License-Identifier: GPL-2.0-only
/*
 * busprof.ko's logic that does not touch the hypervisor; see bp_core.h.
 * Built into the module and, without __KERNEL__, into a unit test.
 */
#ifdef __KERNEL__
#include <linux/build_bug.h>
#include <linux/errno.h>
#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/string.h>
#else
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#define static_assert _Static_assert
#endif

#include "bp_core.h"	/* first: Xen's user-space xen.h needs <stdint.h> */

#include <busprof.h>	/* xen-patches/xen/include/public */

static_assert(sizeof(struct bp_record) == sizeof(struct xen_busprof_record_ext),
	      "bp_record must match xen_busprof_record_ext");
static_assert(offsetof(struct bp_record, value) ==
	      offsetof(struct xen_busprof_record, value) &&
	      offsetof(struct bp_record, flags) ==
	      offsetof(struct xen_busprof_record, flags) &&
	      offsetof(struct bp_record, task) ==
	      offsetof(struct xen_busprof_record_ext, task) &&
	      offsetof(struct bp_record, pcpu) ==
	      offsetof(struct xen_busprof_record_ext, pcpu),
	      "bp_record must match xen_busprof_record_ext");
static_assert(BP_RECORD_CLOCK_SKEWED == XEN_BUSPROF_RECORD_CLOCK_SKEWED &&
	      BP_RECORD_PRE_TRIGGER == XEN_BUSPROF_RECORD_PRE_TRIGGER &&
	      BP_RECORD_WHO == XEN_BUSPROF_RECORD_WHO &&
	      BP_RECORD_STORAGE_OVERLAP == XEN_BUSPROF_RECORD_STORAGE_OVERLAP &&
	      BP_DIR_IN == XEN_BUSPROF_DIR_IN &&
	      BP_STATUS_OK == XEN_BUSPROF_STATUS_OK,
	      "busprof_kernel.h must match public/busprof.h");
static_assert((BP_INTERFACE_VERSION >> 16) ==
	      (XEN_BUSPROF_INTERFACE_VERSION >> 16) &&
	      BP_INTERFACE_VERSION <= XEN_BUSPROF_INTERFACE_VERSION,
	      "busprof_kernel.h describes another interface than busprof.h");

int bp_core_check_range(unsigned int first, unsigned int last)
{
	return first > last || last > 0xffff ? -EINVAL : 0;
}

int bp_core_version_check(unsigned int have, unsigned int want)
{
	if ((have >> 16) != (want >> 16) || (have & 0xffff) < (want & 0xffff))
		return -EPROTONOSUPPORT;
	return 0;
}

long bp_core_xen_version(const struct bp_env *e)
{
	long rc = e->op(e->ctx, XEN_BUSPROF_version, NULL);

	if (rc == -EOPNOTSUPP)
		return 0;
	if (rc > 0 && ((unsigned long)rc >> 16) !=
		      (XEN_BUSPROF_INTERFACE_VERSION >> 16))
		return -EPROTONOSUPPORT;
	return rc;
}

int bp_core_trap(const struct bp_env *e, unsigned int cmd,
		 unsigned int first, unsigned int last)
{
	struct xen_busprof_trap t;
	int rc = bp_core_check_range(first, last);

	if (rc)
		return rc;
	memset(&t, 0, sizeof(t));
	t.first = first;
	t.last = last;

	return (int)e->op(e->ctx, cmd, &t);
}

/*
 * Xen refuses (-EAGAIN) rather than loses a pause or resume while the
 * profiler's control ring is full: ask again until there is room.
 */
int bp_core_pause(const struct bp_env *e, unsigned int cmd)
{
	uint64_t deadline = e->now_ns(e->ctx) + BP_PAUSE_DEADLINE_NS;
	long rc;

	while ((rc = e->op(e->ctx, cmd, NULL)) == -EAGAIN &&
	       e->now_ns(e->ctx) < deadline)
		e->sleep_us(e->ctx, 50);

	return rc == -EAGAIN ? -ETIMEDOUT : (int)rc;
}

/* One extract call, repeated while the profiler works on it. */
static long extract_chunk(const struct bp_env *e, unsigned int cmd,
			  struct xen_busprof_extract *x, uint64_t deadline)
{
	unsigned int pause_us = 20;
	long rc;

	for (;;) {
		rc = e->op(e->ctx, cmd, x);
		if (rc != -EAGAIN && rc != -EBUSY)
			return rc;
		if (e->now_ns(e->ctx) > deadline)
			return -ETIMEDOUT;
		e->sleep_us(e->ctx, pause_us);
		if (pause_us < 1000)
			pause_us *= 2;
	}
}

/*
 * The plain records of a Xen older than 1.2, widened in place: from the
 * last down, so that none is overwritten before it is read.
 */
static void widen(struct bp_record *recs, size_t nr)
{
	const struct xen_busprof_record *plain =
		(const struct xen_busprof_record *)recs;
	size_t i;

	for (i = nr; i-- > 0;) {
		struct bp_record r;

		memset(&r, 0, sizeof(r));
		memcpy(&r, &plain[i], sizeof(plain[i]));
		r.flags &= ~BP_RECORD_WHO;
		recs[i] = r;
	}
}

ssize_t bp_core_extract(const struct bp_env *e, unsigned int first,
			unsigned int last, struct bp_record *buf, size_t cap,
			size_t *needed)
{
	struct xen_busprof_extract x;
	uint64_t deadline = e->now_ns(e->ctx) + BP_EXTRACT_DEADLINE_NS;
	uint64_t offset = 0, snapshot = 0, total;
	bool ext = e->xen_version >= 0x00010002u;
	long rc = bp_core_check_range(first, last);

	if (rc)
		return rc;
	if (cap && !buf)
		return -EINVAL;

	do {
		size_t room = cap - offset;
		struct bp_record *chunk = buf ? buf + offset : NULL;

		memset(&x, 0, sizeof(x));
		x.first = first;
		x.last = last;
		x.nr = room > XEN_BUSPROF_EXTRACT_MAX ?
		       XEN_BUSPROF_EXTRACT_MAX : room;
		x.offset = offset;
		x.snapshot = snapshot;
		/* Plain or extended records: the buffer's type is all that
		 * differs between the two sub-ops. */
		set_xen_guest_handle(x.buffer, (xen_busprof_record_t *)chunk);

		rc = extract_chunk(e, ext ? XEN_BUSPROF_extract_ext :
				   XEN_BUSPROF_extract, &x, deadline);
		if (rc < 0)
			return rc;

		snapshot = x.snapshot;
		total = x.total;
		if (total > cap) {
			if (needed)
				*needed = total;
			return -ENOBUFS;
		}
		if (x.nr == 0 && offset < total)
			return -EIO;	/* the profiler gave nothing to page on */
		if (!ext)
			widen(chunk, x.nr);
		offset += x.nr;
	} while (offset < total);

	if (needed)
		*needed = total;

	return (ssize_t)total;
}
