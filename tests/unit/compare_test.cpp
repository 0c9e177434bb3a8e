// SPDX-License-Identifier: GPL-2.0-only
// busprof diff's statistics: the Mann-Whitney U test, against values
// worked out by hand, a textbook example, brute force and the distribution
// of U over every split of a sample (its percentiles: figures_test).
#include "compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace busprof {
namespace {

// x = {1, 2, 3}, y = {4, 5, 6}: no pair with x > y, U = 0; mean 4.5,
// variance 3 * 3 * 7 / 12 = 5.25, z = -(4.5 - 0.5) / sqrt(5.25) = -1.7457,
// p = erfc(1.7457 / sqrt 2) = 0.08086.
TEST(MannWhitney, SeparatedSamplesByHand) {
    MannWhitney t = mann_whitney(std::vector<int64_t>{1, 2, 3}, std::vector<int64_t>{4, 5, 6});
    EXPECT_EQ(t.u, 0);
    EXPECT_DOUBLE_EQ(t.sd, std::sqrt(5.25));
    EXPECT_NEAR(t.z, -1.745743, 1e-6);
    EXPECT_NEAR(t.p, 0.080856, 1e-6);
    MannWhitney r = mann_whitney(std::vector<int64_t>{4, 5, 6}, std::vector<int64_t>{1, 2, 3});
    EXPECT_EQ(r.u, 9); // n1 n2 - U
    EXPECT_NEAR(r.z, 1.745743, 1e-6);
    EXPECT_DOUBLE_EQ(r.p, t.p);
}

// Hollander & Wolfe (1973), p. 69, the example of R's wilcox.test (values
// times 100: ranks do not change).  R prints W = 35 and the exact
// one-sided p = 0.1272; the normal approximation with continuity
// correction: mean 25, variance 10 * 5 * 16 / 12 = 66.67, z = 9.5 / 8.165
// = 1.1635, two-sided p = 0.2446, one-sided 0.1223.
TEST(MannWhitney, TextbookExampleOfHollanderAndWolfe) {
    std::vector<int64_t> x = {80, 83, 189, 104, 145, 138, 191, 164, 73, 146};
    std::vector<int64_t> y = {115, 88, 90, 74, 121};
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    MannWhitney t = mann_whitney(x, y);
    EXPECT_EQ(t.u, 35);
    EXPECT_DOUBLE_EQ(t.sd, std::sqrt(200.0 / 3));
    EXPECT_NEAR(t.z, 1.163508, 1e-6);
    EXPECT_NEAR(t.p, 0.244624, 1e-6);
    EXPECT_NEAR(t.p / 2, 0.1272, 0.006); // near the exact one-sided value
}

// x = {1, 2, 2, 3}, y = {2, 3, 3, 4}.  Midranks: 1 -> 1, the three 2s ->
// 3, the three 3s -> 6, 4 -> 8; x's rank sum 13, U = 13 - 10 = 3.  Ties
// of 3 and 3: sum(t^3 - t) = 48; variance 16 / 12 * (9 - 48 / 56) =
// 10.857; z = -(8 - 3 - 0.5) / 3.2950 = -1.3657, p = 0.17203.
TEST(MannWhitney, TiesByHand) {
    MannWhitney t =
        mann_whitney(std::vector<int64_t>{1, 2, 2, 3}, std::vector<int64_t>{2, 3, 3, 4});
    EXPECT_EQ(t.u, 3);
    EXPECT_NEAR(t.sd * t.sd, 16.0 / 12 * (9 - 48.0 / 56), 1e-12);
    EXPECT_NEAR(t.z, -1.365698, 1e-6);
    EXPECT_NEAR(t.p, 0.172034, 1e-6);
}

TEST(MannWhitney, EveryValueTiedIsNoEvidence) {
    MannWhitney t = mann_whitney(std::vector<int64_t>{5, 5, 5}, std::vector<int64_t>{5, 5});
    EXPECT_EQ(t.u, 3);
    EXPECT_EQ(t.z, 0);
    EXPECT_EQ(t.p, 1);
}

// U counts the pairs: brute force over random samples full of ties.
TEST(MannWhitney, UIsTheCountOfPairsWithHalfTheTies) {
    std::mt19937_64 rng(7);
    for (int round = 0; round < 200; round++) {
        std::vector<int64_t> x(1 + rng() % 40), y(1 + rng() % 40);
        for (auto* v : {&x, &y})
            for (auto& e : *v)
                e = static_cast<int64_t>(rng() % 12) - 3;
        std::sort(x.begin(), x.end());
        std::sort(y.begin(), y.end());
        double pairs = 0;
        for (int64_t a : x)
            for (int64_t b : y)
                pairs += a > b ? 1 : a == b ? 0.5 : 0;
        MannWhitney t = mann_whitney(x, y), r = mann_whitney(y, x);
        ASSERT_EQ(t.u, pairs);
        ASSERT_EQ(t.u + r.u, static_cast<double>(x.size() * y.size()));
        ASSERT_DOUBLE_EQ(t.p, r.p);
    }
}

// If both sides come from one distribution, every split of the pooled
// values into sides of n1 and n2 is equally likely: U's variance over all
// of them is exactly the tie-corrected formula's.
TEST(MannWhitney, TieCorrectedVarianceIsThatOfUOverEverySplit) {
    const std::vector<int64_t> pooled = {1, 1, 2, 3, 3, 3, 4, 5, 5, 7};
    const size_t n1 = 4;
    std::vector<bool> in_x(pooled.size(), false);
    std::fill(in_x.begin(), in_x.begin() + n1, true);
    double sum = 0, sum2 = 0, splits = 0, sd = 0;
    do {
        std::vector<int64_t> x, y;
        for (size_t i = 0; i < pooled.size(); i++)
            (in_x[i] ? x : y).push_back(pooled[i]);
        MannWhitney t = mann_whitney(x, y);
        sum += t.u;
        sum2 += t.u * t.u;
        splits++;
        sd = t.sd;
    } while (std::prev_permutation(in_x.begin(), in_x.end()));
    EXPECT_EQ(splits, 210); // 10 choose 4
    double mean = sum / splits;
    EXPECT_NEAR(mean, 4.0 * 6 / 2, 1e-9);
    EXPECT_NEAR(sum2 / splits - mean * mean, sd * sd, 1e-9);
}

// Under no change the test flags about alpha of the comparisons, and a
// real shift with many rows gives a tiny p.
TEST(MannWhitney, PIsCalibratedUnderNoChangeAndSmallUnderAShift) {
    std::mt19937_64 rng(11);
    std::lognormal_distribution<double> bus(7.0, 0.3); // ~1100 ns, skewed like bus times
    auto sample = [&](size_t n, double scale) {
        std::vector<int64_t> v(n);
        for (auto& e : v)
            e = static_cast<int64_t>(bus(rng) * scale);
        std::sort(v.begin(), v.end());
        return v;
    };
    int below = 0;
    for (int i = 0; i < 2000; i++)
        below += mann_whitney(sample(60, 1), sample(40, 1)).p < 0.01;
    EXPECT_GE(below, 5); // 20 expected
    EXPECT_LE(below, 45);
    MannWhitney t = mann_whitney(sample(500, 1), sample(500, 1.2));
    EXPECT_LT(t.p, 1e-9);
    EXPECT_LT(t.z, 0);
}

} // namespace
} // namespace busprof
