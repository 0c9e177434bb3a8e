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

/* What every record must say, whatever its space. */
static const char *check_common(const struct bp_record *r,
				const struct bp_record *prev,
				uint64_t text_lo, uint64_t text_hi)
{
	if (r->status != BP_STATUS_OK)
		return "status not ok";
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
	if (w->check_value && r->value != w->value)
		return "another value than the driver wrote or read";
	return check_common(r, prev, text_lo, text_hi);
}

static const char *check_wide(const struct bp_record_wide *r,
			      const struct bp_record_wide *prev,
			      const struct kex_mmio_access *w,
			      uint64_t text_lo, uint64_t text_hi)
{
	if (r->space != BP_SPACE_MMIO)
		return "not a memory-mapped access";
	if (r->addr != w->addr)
		return "another address than the access made";
	if (r->rec.dir != w->dir)
		return "another direction than the access made";
	if (r->rec.size != w->size)
		return "another size than the access made";
	if (w->check_value && r->value != w->value)
		return "another value than the driver wrote or read";
	return check_common(&r->rec, prev ? &prev->rec : NULL, text_lo,
			    text_hi);
}

/* Counts what every record adds to the result. */
static void tally(const struct bp_record *r, struct kex_result *res)
{
	if (r->flags & BP_RECORD_CLOCK_SKEWED)
		res->skewed++;
	if (r->rip < res->rip_min)
		res->rip_min = r->rip;
	if (r->rip > res->rip_max)
		res->rip_max = r->rip;
}

/* The start of either check: 0 if n records are as many as accesses made. */
static int start(size_t n, size_t nwant, struct kex_result *res)
{
	memset(res, 0, sizeof(*res));
	res->rip_min = ~(uint64_t)0;
	if (n == nwant)
		return 0;
	res->bad = n < nwant ? n : nwant;
	res->why = "another number of records than accesses made";
	return -EBADMSG;
}

int kex_check_records(const struct bp_record *recs, size_t n,
		      const struct kex_access *want, size_t nwant,
		      uint64_t text_lo, uint64_t text_hi,
		      struct kex_result *res)
{
	size_t i;

	if (start(n, nwant, res))
		return -EBADMSG;
	for (i = 0; i < n; i++) {
		res->why = check_one(&recs[i], i ? &recs[i - 1] : NULL,
				     &want[i], text_lo, text_hi);
		if (res->why) {
			res->bad = i;
			return -EBADMSG;
		}
		tally(&recs[i], res);
	}
	return 0;
}

int kex_check_wide(const struct bp_record_wide *recs, size_t n,
		   const struct kex_mmio_access *want, size_t nwant,
		   uint64_t text_lo, uint64_t text_hi, struct kex_result *res)
{
	size_t i;

	if (start(n, nwant, res))
		return -EBADMSG;
	for (i = 0; i < n; i++) {
		res->why = check_wide(&recs[i], i ? &recs[i - 1] : NULL,
				      &want[i], text_lo, text_hi);
		if (res->why) {
			res->bad = i;
			return -EBADMSG;
		}
		tally(&recs[i].rec, res);
	}
	return 0;
}

/* FNV-1a (64 bits) of one record, folded into h (kexample_check.h). */
static uint64_t fold(uint64_t h, const struct bp_record *r)
{
	int who = !!(r->flags & BP_RECORD_WHO);
	const uint64_t f[] = {
		r->id, r->vcpu, r->dir, r->port, r->size, r->value, r->rip,
		r->t_trap_ns, r->t_bus_begin_ns, r->t_bus_end_ns,
		r->t_resume_ns, r->status, r->flags & ~BP_RECORD_WHO,
		who ? r->task : 0, who ? r->pcpu : 0,
	};
	unsigned int i, b;

	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		for (b = 0; b < 8; b++)
			h = (h ^ ((f[i] >> (8 * b)) & 0xff)) * 0x100000001b3ULL;
	return h;
}

size_t kex_digests(const struct bp_record *recs, size_t n, uint64_t *out,
		   size_t max)
{
	size_t i, blocks = 0;
	uint64_t h = 0;

	for (i = 0; i < n && blocks < max; i++) {
		if (i % KEX_DIGEST_BLOCK == 0)
			h = 0xcbf29ce484222325ULL;
		h = fold(h, &recs[i]);
		if (i % KEX_DIGEST_BLOCK == KEX_DIGEST_BLOCK - 1 || i == n - 1)
			out[blocks++] = h;
	}
	return blocks;
}
