/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The example driver module's check of its own records: what it expects
 * of each access it made, and whether bp_extract's records say exactly
 * that.  Built into busprof-kexample.ko and into a user-space unit test.
 */
#ifndef BUSPROF_KEXAMPLE_CHECK_H
#define BUSPROF_KEXAMPLE_CHECK_H

#include <busprof/busprof_kernel.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One access the driver made. */
struct kex_access {
	uint16_t port;
	uint8_t dir;		/* BP_DIR_* */
	uint8_t check_value;	/* 1: the record must carry `value` */
	uint32_t value;
};

/* One memory-mapped access the driver made. */
struct kex_mmio_access {
	uint64_t addr;		/* guest-physical */
	uint8_t dir;		/* BP_DIR_* */
	uint8_t size;		/* 1, 2, 4 or 8 */
	uint8_t check_value;	/* 1: the record must carry `value` */
	uint64_t value;
};

struct kex_result {
	size_t bad;		/* index of the first wrong record, if any */
	const char *why;	/* NULL if every record is right */
	size_t skewed;		/* records flagged BP_RECORD_CLOCK_SKEWED */
	uint64_t rip_min, rip_max;
};

/*
 * 0 if recs[0..n) are the accesses want[0..nwant), in order: same count,
 * port, direction, size 1, status ok, value where checked, a RIP in
 * [text_lo, text_hi), ids increasing, and the stamps ordered (trap, bus
 * begin, bus end, resume) unless flagged clock-skewed, and flagged only if
 * not ordered.  -EBADMSG otherwise, with res->why and res->bad.
 */
int kex_check_records(const struct bp_record *recs, size_t n,
		      const struct kex_access *want, size_t nwant,
		      uint64_t text_lo, uint64_t text_hi,
		      struct kex_result *res);

/*
 * The digest of recs[0..n) that busprof-example-driver -d prints too:
 * FNV-1a (64 bits) over each record's id, vcpu, dir, port, size, value,
 * rip, four stamps, status, flags (but BP_RECORD_WHO), task and pcpu (0
 * without BP_RECORD_WHO), each as 8 little-endian bytes, one digest per
 * KEX_DIGEST_BLOCK records, at most max of them into out.  The trace DB's
 * rows fold the same (tests/system/busprof/check_digest.py): equal digests
 * say the extract equals the DB row for row.  Returns the digests written.
 */
#define KEX_DIGEST_BLOCK 1024
size_t kex_digests(const struct bp_record *recs, size_t n, uint64_t *out,
		   size_t max);

/*
 * kex_check_records for bp_extract_mmio's records: the same rules, with
 * space MMIO, the guest-physical address, the access's size and the whole
 * 64-bit value in place of port, size 1 and the 32-bit value.
 */
int kex_check_wide(const struct bp_record_wide *recs, size_t n,
		   const struct kex_mmio_access *want, size_t nwant,
		   uint64_t text_lo, uint64_t text_hi, struct kex_result *res);

#ifdef __cplusplus
}
#endif

#endif /* BUSPROF_KEXAMPLE_CHECK_H */
