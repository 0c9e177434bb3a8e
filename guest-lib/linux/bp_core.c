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
static_assert(sizeof(struct bp_record_wide) ==
	      sizeof(struct xen_busprof_record_wide) &&
	      offsetof(struct bp_record_wide, addr) ==
	      offsetof(struct xen_busprof_record_wide, addr) &&
	      offsetof(struct bp_record_wide, value) ==
	      offsetof(struct xen_busprof_record_wide, value) &&
	      offsetof(struct bp_record_wide, space) ==
	      offsetof(struct xen_busprof_record_wide, space) &&
	      BP_SPACE_MMIO == XEN_BUSPROF_SPACE_MMIO,
	      "bp_record_wide must match xen_busprof_record_wide");
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

int bp_core_check_span(uint64_t first, uint64_t last)
{
	if (first > last || last >= (1ull << 52) ||
	    first % XEN_BUSPROF_MMIO_PAGE_SIZE ||
	    (last + 1) % XEN_BUSPROF_MMIO_PAGE_SIZE)
		return -EINVAL;
	return 0;
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

int bp_core_trap_span(const struct bp_env *e, unsigned int cmd,
		      uint64_t first, uint64_t last)
{
	struct xen_busprof_span s;
	int rc = bp_core_check_span(first, last);

	if (rc)
		return rc;
	if (e->xen_version < 0x00010003u)
		return -EOPNOTSUPP;
	memset(&s, 0, sizeof(s));
	s.first = first;
	s.last = last;
	s.space = XEN_BUSPROF_SPACE_MMIO;

	return (int)e->op(e->ctx, cmd, &s);
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
			  void *arg, uint64_t deadline)
{
	unsigned int pause_us = 20;
	long rc;

	for (;;) {
		rc = e->op(e->ctx, cmd, arg);
		if (rc != -EAGAIN && rc != -EBUSY)
			return rc;
		if (e->now_ns(e->ctx) > deadline)
			return -ETIMEDOUT;
		e->sleep_us(e->ctx, pause_us);
		if (pause_us < 1000)
			pause_us *= 2;
	}
}

/* What an extract asks for: the sub-op, the span and its records' size. */
struct extract_req {
	unsigned int cmd;	/* extract, extract_ext or extract_wide */
	uint64_t first, last;
	size_t rec_size;
};

/* Where a page of the snapshot starts, and what the profiler said of it. */
struct extract_page {
	uint64_t offset, snapshot, total;
	uint32_t nr;
};

/*
 * One page of the snapshot into chunk: the sub-op's argument made, the call
 * repeated while the profiler works on it, and its answer read back.
 */
static long extract_page(const struct bp_env *e,
			 const struct extract_req *rq, void *chunk,
			 struct extract_page *pg, uint64_t deadline)
{
	long rc;

	if (rq->cmd == XEN_BUSPROF_extract_wide) {
		struct xen_busprof_extract_wide x;

		memset(&x, 0, sizeof(x));
		x.span.first = rq->first;
		x.span.last = rq->last;
		x.span.space = XEN_BUSPROF_SPACE_MMIO;
		x.nr = pg->nr;
		x.offset = pg->offset;
		x.snapshot = pg->snapshot;
		set_xen_guest_handle(x.buffer,
				     (xen_busprof_record_wide_t *)chunk);
		rc = extract_chunk(e, rq->cmd, &x, deadline);
		pg->snapshot = x.snapshot;
		pg->total = x.total;
		pg->nr = x.nr;
	} else {
		struct xen_busprof_extract x;

		memset(&x, 0, sizeof(x));
		x.first = (uint16_t)rq->first;
		x.last = (uint16_t)rq->last;
		x.nr = pg->nr;
		x.offset = pg->offset;
		x.snapshot = pg->snapshot;
		/* Plain or extended records: the buffer's type is all that
		 * differs between the two sub-ops. */
		set_xen_guest_handle(x.buffer, (xen_busprof_record_t *)chunk);
		rc = extract_chunk(e, rq->cmd, &x, deadline);
		pg->snapshot = x.snapshot;
		pg->total = x.total;
		pg->nr = x.nr;
	}
	return rc;
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

/*
 * Pages through one snapshot of the profiler's records into buf (cap
 * records of rq->rec_size bytes).  widen_plain: the records come plain
 * from a Xen older than 1.2 and become struct bp_record in place.
 */
static ssize_t extract_all(const struct bp_env *e,
			   const struct extract_req *rq, void *buf,
			   size_t cap, size_t *needed, bool widen_plain)
{
	uint64_t deadline = e->now_ns(e->ctx) + BP_EXTRACT_DEADLINE_NS;
	struct extract_page pg;
	long rc;

	if (cap && !buf)
		return -EINVAL;

	memset(&pg, 0, sizeof(pg));
	do {
		size_t room = cap - pg.offset;
		void *chunk = buf ? (char *)buf + pg.offset * rq->rec_size :
			      NULL;

		pg.nr = room > XEN_BUSPROF_EXTRACT_MAX ?
			XEN_BUSPROF_EXTRACT_MAX : room;
		rc = extract_page(e, rq, chunk, &pg, deadline);
		if (rc < 0)
			return rc;
		if (pg.total > cap) {
			if (needed)
				*needed = pg.total;
			return -ENOBUFS;
		}
		if (pg.nr == 0 && pg.offset < pg.total)
			return -EIO;	/* the profiler gave nothing to page on */
		if (widen_plain)
			widen(chunk, pg.nr);
		pg.offset += pg.nr;
	} while (pg.offset < pg.total);

	if (needed)
		*needed = pg.total;

	return (ssize_t)pg.total;
}

ssize_t bp_core_extract(const struct bp_env *e, unsigned int first,
			unsigned int last, struct bp_record *buf, size_t cap,
			size_t *needed)
{
	bool ext = e->xen_version >= 0x00010002u;
	struct extract_req rq = {
		.cmd = ext ? XEN_BUSPROF_extract_ext : XEN_BUSPROF_extract,
		.first = first,
		.last = last,
		.rec_size = sizeof(*buf),
	};
	int rc = bp_core_check_range(first, last);

	if (rc)
		return rc;

	return extract_all(e, &rq, buf, cap, needed, !ext);
}

ssize_t bp_core_extract_mmio(const struct bp_env *e, uint64_t first,
			     uint64_t last, struct bp_record_wide *buf,
			     size_t cap, size_t *needed)
{
	struct extract_req rq = {
		.cmd = XEN_BUSPROF_extract_wide,
		.first = first,
		.last = last,
		.rec_size = sizeof(*buf),
	};

	/* Any bounds, as Xen takes them: not only whole pages. */
	if (first > last)
		return -EINVAL;
	if (e->xen_version < 0x00010003u)
		return -EOPNOTSUPP;

	return extract_all(e, &rq, buf, cap, needed, false);
}
