// SPDX-License-Identifier: GPL-2.0-only
// busprof diff's statistics: the Mann-Whitney U test, against values
// worked out by hand, a textbook example, brute force and the distribution
// of U over every split of a sample; the Hodges-Lehmann shift and its
// interval by hand, against brute force and by its coverage; the normal and
// Student t quantiles against tables (its percentiles: figures_test).
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

// The differences y - x of {1, 2, 3} and {4, 5, 6}: 1 2 2 3 3 3 4 4 5.
// Their median, the 5th, is 3.  U's sd is sqrt(5.25) = 2.2913 (as above);
// at 80 %, z = 1.2816 and c = floor(4.5 - 2.9365) = 1: [D_1, D_9] = [1, 5];
// at 90 %, z = 1.6449 and c = floor(0.73) = 0: three values a side are too
// few for an interval.
TEST(HodgesLehmann, SeparatedSamplesByHand) {
    std::vector<int64_t> x = {1, 2, 3}, y = {4, 5, 6};
    Shift s = hodges_lehmann(x, y, 0.8);
    EXPECT_EQ(s.estimate, 3);
    ASSERT_TRUE(s.low && s.high);
    EXPECT_EQ(*s.low, 1);
    EXPECT_EQ(*s.high, 5);
    Shift wider = hodges_lehmann(x, y, 0.9);
    EXPECT_EQ(wider.estimate, 3);
    EXPECT_FALSE(wider.low || wider.high);
    Shift back = hodges_lehmann(y, x, 0.8); // the shift of x against y
    EXPECT_EQ(back.estimate, -3);
    EXPECT_EQ(*back.low, -5);
    EXPECT_EQ(*back.high, -1);
}

// {0, 10} against {1, 2}: differences -9 -8 1 2, an even count: the
// median is the mean of the middle two, (-8 + 1) / 2.
TEST(HodgesLehmann, EvenCountTakesTheMeanOfTheMiddleTwo) {
    EXPECT_EQ(hodges_lehmann(std::vector<int64_t>{0, 10}, std::vector<int64_t>{1, 2}, 0.5).estimate,
              -3.5);
}

// x = {1, 2, 2, 3}, y = {2, 3, 3, 4} (TiesByHand): the 16 differences
// sorted are -1, 0 x4, 1 x6, 2 x4, 3; the median (D_8 + D_9) / 2 = 1.  U's
// tie-corrected sd is 3.2950; at 50 %, z = 0.6745, c = floor(8 - 2.2224) =
// 5: [D_5, D_12] = [0, 2], which holds 0: not significant.
TEST(HodgesLehmann, TiesByHand) {
    std::vector<int64_t> x = {1, 2, 2, 3}, y = {2, 3, 3, 4};
    Shift s = hodges_lehmann(x, y, 0.5);
    EXPECT_EQ(s.estimate, 1);
    ASSERT_TRUE(s.low && s.high);
    EXPECT_EQ(*s.low, 0);
    EXPECT_EQ(*s.high, 2);
}

TEST(HodgesLehmann, EveryValueTiedHasNoInterval) {
    Shift s = hodges_lehmann(std::vector<int64_t>(20, 7), std::vector<int64_t>(30, 7), 0.99);
    EXPECT_EQ(s.estimate, 0);
    EXPECT_FALSE(s.low || s.high);
}

// kth_difference against every difference formed and sorted, on samples
// with ties, negative values and the ends of int64.
TEST(HodgesLehmann, KthDifferenceIsThatOfAllPairsSorted) {
    std::mt19937_64 rng(5);
    for (int round = 0; round < 300; round++) {
        std::vector<int64_t> x(1 + rng() % 25), y(1 + rng() % 25);
        for (auto* v : {&x, &y})
            for (auto& e : *v)
                e = static_cast<int64_t>(rng() % 40) - 20;
        if (round % 50 == 0) {
            x.front() = INT64_MIN + 1;
            y.front() = INT64_MAX - 1;
        }
        std::sort(x.begin(), x.end());
        std::sort(y.begin(), y.end());
        std::vector<__int128> all;
        for (int64_t a : x)
            for (int64_t b : y)
                all.push_back(static_cast<__int128>(b) - a);
        std::sort(all.begin(), all.end());
        for (uint64_t k = 1; k <= all.size(); k++) {
            __int128 want = std::clamp<__int128>(all[k - 1], INT64_MIN, INT64_MAX);
            ASSERT_EQ(kth_difference(x, y, k), static_cast<int64_t>(want)) << "k " << k;
        }
    }
}

// Over many pairs of samples with a known shift, the interval holds it
// about as often as its confidence says, and it excludes 0 about as often
// as the Mann-Whitney test gives p below 1 - confidence.
TEST(HodgesLehmann, IntervalCoversTheTrueShiftAtItsConfidence) {
    std::mt19937_64 rng(13);
    std::lognormal_distribution<double> bus(9.0, 0.3); // ~8000 ns: few ties
    auto sample = [&](size_t n, int64_t shift) {
        std::vector<int64_t> v(n);
        for (auto& e : v)
            e = static_cast<int64_t>(bus(rng)) + shift;
        std::sort(v.begin(), v.end());
        return v;
    };
    int covered = 0, excludes_zero = 0, rejected = 0;
    const int rounds = 1000;
    for (int i = 0; i < rounds; i++) {
        auto x = sample(40, 0), y = sample(30, 300);
        Shift s = hodges_lehmann(x, y, 0.9);
        ASSERT_TRUE(s.low && s.high);
        ASSERT_LE(*s.low, s.estimate);
        ASSERT_GE(*s.high, s.estimate);
        covered += *s.low <= 300 && 300 <= *s.high;
        excludes_zero += *s.low > 0 || *s.high < 0;
        rejected += mann_whitney(x, y).p < 0.1;
    }
    EXPECT_GE(covered, 870); // 900 expected
    EXPECT_LE(covered, 930);
    EXPECT_NEAR(excludes_zero, rejected, rounds / 50);
}

// Tables: the normal's two-sided 95 % and 99 % points; Student's t for 1,
// 2, 5, 10 degrees of freedom (odd and even sums) and, for many, the normal's.
TEST(Quantiles, NormalAndStudentTAgainstTables) {
    EXPECT_NEAR(normal_quantile(0.95), 1.959964, 1e-6);
    EXPECT_NEAR(normal_quantile(0.99), 2.575829, 1e-6);
    EXPECT_NEAR(normal_quantile(0.5), 0.674490, 1e-6);
    EXPECT_NEAR(student_t_quantile(0.95, 1), 12.706205, 1e-5);
    EXPECT_NEAR(student_t_quantile(0.99, 2), 9.924843, 1e-5);
    EXPECT_NEAR(student_t_quantile(0.95, 2), 4.302653, 1e-6);
    EXPECT_NEAR(student_t_quantile(0.99, 5), 4.032143, 1e-6);
    EXPECT_NEAR(student_t_quantile(0.95, 10), 2.228139, 1e-6);
    EXPECT_NEAR(student_t_quantile(0.95, 1000), 1.962339, 1e-5);
}

} // namespace
} // namespace busprof
