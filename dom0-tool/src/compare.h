/* SPDX-License-Identifier: GPL-2.0-only */
// Two samples of latencies compared (busprof diff): the Mann-Whitney U
// test.  Their percentiles: nearest_rank() (figures.h).
#pragma once

#include <cstdint>
#include <span>

namespace busprof {

struct MannWhitney {
    double u;  // U of the first sample: pairs (x, y) with x > y, plus half the ties
    double sd; // U's standard deviation if both came from one distribution, ties corrected
    double z;  // (U - mean) / sd with the continuity correction: < 0 when x tends lower
    double p;  // two-sided p-value of the normal approximation
};

// The Mann-Whitney U test (Wilcoxon rank-sum) of x against y, both sorted
// ascending and not empty: U from the pooled ranks, ties given their
// midrank; its variance corrected for ties,
//     n1 n2 / 12 * ((N + 1) - sum(t^3 - t) / (N (N - 1))),
// and p = P(|Z| >= |z|) for a standard normal Z, where
//     z = (|U - n1 n2 / 2| - 1/2) / sd, signed as U - n1 n2 / 2.
// All values tied (variance 0): z = 0, p = 1.
MannWhitney mann_whitney(std::span<const int64_t> x, std::span<const int64_t> y);

} // namespace busprof
