// SPDX-License-Identifier: GPL-2.0-only
/*
 * The example driver module's record check; see kexample_check.h.
 * Built into busprof-kexample.ko and, without __KERNEL__, into a unit test.
 */
#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/string.h>
#else
#include <errno.h>
#include <string.h>
#endif

#include "kexample_check.h"

static int ordered(const struct bp_record *r)
{
	return r->t_trap_ns <= r->t_bus_begin_ns &&
	       r->t_bus_begin_ns <= r->t_bus_end_ns &&
	       r->t_bus_end_ns <= r->t_resume_ns;
}

static const char *check_one(const struct bp_record *r,
			     const struct bp_record *prev,
			     const struct kex_access *w,
			     uint64_t text_lo, uint64_t text_hi)
{
	if (r->port != w->port)
		return "another port than the access made";
	if (r->dir != w->dir)
		return "another direction than the access made";
	if (r->size != 1)
		return "not a one-byte access";
	if (r->status != BP_STATUS_OK)
		return "status not ok";
	if (w->check_value && r->value != w->value)
		return "another value than the driver wrote or read";
	if (r->rip < text_lo || r->rip >= text_hi)
		return "RIP outside the driver's text";
	if (prev && r->id <= prev->id)
		return "ids not increasing";
	/*
	 * The hypervisor's stamps and the profiler's come from two clocks: a
	 * record out of order must say so, and only such a record.
	 */
	if (r->t_bus_begin_ns > r->t_bus_end_ns)
		return "bus access ends before it begins (one clock)";
	if (r->flags & BP_RECORD_CLOCK_SKEWED) {
		if (ordered(r))
			return "flagged clock-skewed but its stamps are in order";
	} else if (!ordered(r)) {
		return "stamps out of order and not flagged clock-skewed";
	}
	return NULL;
}

int kex_check_records(const struct bp_record *recs, size_t n,
		      const struct kex_access *want, size_t nwant,
		      uint64_t text_lo, uint64_t text_hi,
		      struct kex_result *res)
{
	size_t i;

	memset(res, 0, sizeof(*res));
	res->rip_min = ~(uint64_t)0;
	if (n != nwant) {
		res->bad = n < nwant ? n : nwant;
		res->why = "another number of records than accesses made";
		return -EBADMSG;
	}
	for (i = 0; i < n; i++) {
		const struct bp_record *r = &recs[i];

		res->why = check_one(r, i ? &recs[i - 1] : NULL, &want[i],
				     text_lo, text_hi);
		if (res->why) {
			res->bad = i;
			return -EBADMSG;
		}
		if (r->flags & BP_RECORD_CLOCK_SKEWED)
			res->skewed++;
		if (r->rip < res->rip_min)
			res->rip_min = r->rip;
		if (r->rip > res->rip_max)
			res->rip_max = r->rip;
	}
	return 0;
}
