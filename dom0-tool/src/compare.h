/* SPDX-License-Identifier: GPL-2.0-only */
// Two samples of latencies compared (busprof diff): the Mann-Whitney U
// test, the Hodges-Lehmann shift with its distribution-free confidence
// interval, and the quantiles they and the between-session yardstick need.
// Their percentiles: nearest_rank() (figures.h).
#pragma once

#include <cstdint>
#include <optional>
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

// The k-th smallest (1 <= k <= n1 n2) of the n1 n2 differences y_j - x_i,
// x and y sorted ascending, without forming them: a binary search on the
// value, each step counting the differences at or below it in one walk.
int64_t kth_difference(std::span<const int64_t> x, std::span<const int64_t> y, uint64_t k);

struct Shift {
    double estimate; // median of the differences y_j - x_i (a half when n1 n2 is even)
    // The confidence interval [D_(c), D_(n1 n2 + 1 - c)] of the ordered
    // differences, c = floor(n1 n2 / 2 - z sd) with sd U's (ties
    // corrected) and z the standard normal quantile of (1 + confidence) / 2;
    // none when c < 1 (too few values for that confidence) or all values
    // are tied.
    std::optional<int64_t> low, high;
};

// The Hodges-Lehmann estimate of the shift of y against x (how much y's
// values are larger), both sorted and not empty, and its distribution-free
// interval (Moses; Hollander & Wolfe, 4.3) from the inverted Mann-Whitney
// test: it excludes 0 where that test's p < 1 - confidence, up to rounding.
Shift hodges_lehmann(std::span<const int64_t> x, std::span<const int64_t> y, double confidence);

// z with P(|Z| <= z) = confidence for a standard normal Z (0 < confidence < 1).
double normal_quantile(double confidence);

// t with P(|T| <= t) = confidence for Student's T with df >= 1 degrees of
// freedom, from the closed form of its distribution for integer df
// (Abramowitz & Stegun 26.7.3-4).
double student_t_quantile(double confidence, int df);

} // namespace busprof
