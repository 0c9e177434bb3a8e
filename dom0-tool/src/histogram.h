/* SPDX-License-Identifier: GPL-2.0-only */
// Log-linear latency buckets, laid out as HdrHistogram does: every value
// below 2^(kSubBucketBits + 1) ns has a bucket of its own; above that, each
// power of two [2^m, 2^(m+1)) is cut into 2^kSubBucketBits buckets of equal
// width 2^(m - kSubBucketBits).  A bucket's width is therefore at most
// 1/2^kSubBucketBits of its lowest value, and its middle value
// lo + (hi - lo + 1) / 2 is within 1/2^(kSubBucketBits + 1) of any value in
// it: with 7 bits, 128 buckets per power of two and a percentile read from
// the buckets within 1/256 (0.39 %) of the exact one.  The summaries the
// writer keeps (tables latency_totals and latency_buckets) use them, and
// busprof report's histograms the same layout with 2 bits: four bars per
// power of two, each the union of 32 of the summaries' buckets.  One
// layout: a chart never disagrees with the summaries about which values
// lie together.
#pragma once

#include <bit>
#include <cstdint>

namespace busprof {

constexpr int kSubBucketBits = 7;

struct Bucket {
    int64_t lo, hi; // the values it holds: lo..hi (ns), inclusive
};

// The buckets of values 0..INT64_MAX numbered from 0 in order, for arrays
// of counts: values below 2^(bits + 1) are their own number, then 2^bits
// buckets a power of two.  bits: kSubBucketBits, or fewer for a coarser
// view of the same layout (busprof report's charts), each of whose buckets
// is then exactly a union of the summaries' buckets.
constexpr int kExactBelow = 2 << kSubBucketBits; // 256
constexpr int kBuckets = kExactBelow + (62 - kSubBucketBits) * (1 << kSubBucketBits);

inline int bucket_index(int64_t v, int bits = kSubBucketBits) { // v >= 0
    uint64_t u = static_cast<uint64_t>(v);
    int msb = 63 - std::countl_zero(u | 1);
    if (msb <= bits)
        return static_cast<int>(v);
    int shift = msb - bits;
    return (2 << bits) + (msb - bits - 1) * (1 << bits) +
           static_cast<int>((u >> shift) - (uint64_t{1} << bits));
}

inline Bucket bucket_at(int index, int bits = kSubBucketBits) {
    if (index < (2 << bits))
        return {index, index};
    int k = index - (2 << bits);
    int shift = 1 + k / (1 << bits);
    uint64_t lo = ((uint64_t{1} << bits) + k % (1 << bits)) << shift;
    return {static_cast<int64_t>(lo), static_cast<int64_t>(lo + ((uint64_t{1} << shift) - 1))};
}

// The bucket of v.  Negative values (which one clock cannot produce) get
// the mirror image of the bucket of -v, so the bound holds for them too.
inline Bucket bucket_of(int64_t v, int bits = kSubBucketBits) {
    if (v < 0) {
        Bucket b = bucket_of(v == INT64_MIN ? INT64_MAX : -v, bits);
        return {-b.hi, -b.lo};
    }
    return bucket_at(bucket_index(v, bits), bits);
}

// The value that stands for a bucket in a percentile (as the views compute it).
inline int64_t bucket_middle(const Bucket& b) {
    return b.lo + (b.hi - b.lo + 1) / 2;
}

} // namespace busprof
