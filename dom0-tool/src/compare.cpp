// SPDX-License-Identifier: GPL-2.0-only
#include "compare.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numbers>

namespace busprof {

MannWhitney mann_whitney(std::span<const int64_t> x, std::span<const int64_t> y) {
    assert(!x.empty() && !y.empty());
    assert(std::is_sorted(x.begin(), x.end()) && std::is_sorted(y.begin(), y.end()));
    // One walk over both samples by tied value: a group of a values of x
    // and b of y adds a * (y below it) + a * b / 2 to U and t^3 - t (t =
    // a + b) to the ties' sum.  2U is an integer: counted exactly.
    uint64_t two_u = 0;
    long double ties = 0;
    size_t i = 0, j = 0, y_below = 0;
    while (i < x.size() || j < y.size()) {
        int64_t v = j == y.size() || (i < x.size() && x[i] < y[j]) ? x[i] : y[j];
        size_t a = 0, b = 0;
        for (; i < x.size() && x[i] == v; i++)
            a++;
        for (; j < y.size() && y[j] == v; j++)
            b++;
        two_u += a * (2 * y_below + b);
        y_below += b;
        long double t = static_cast<long double>(a + b);
        ties += t * t * t - t;
    }
    long double n1 = static_cast<long double>(x.size()), n2 = static_cast<long double>(y.size());
    long double n = n1 + n2;
    long double u = static_cast<long double>(two_u) / 2;
    long double mean = n1 * n2 / 2;
    long double var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)));
    MannWhitney r{static_cast<double>(u), 0, 0, 1};
    if (var <= 0)
        return r; // every value the same: no evidence either way
    r.sd = static_cast<double>(std::sqrt(var));
    long double d = std::max<long double>(std::fabs(u - mean) - 0.5L, 0);
    long double z = (u < mean ? -d : d) / std::sqrt(var);
    r.z = static_cast<double>(z);
    r.p = static_cast<double>(std::erfc(std::fabs(z) / std::sqrt(2.0L)));
    return r;
}

int64_t kth_difference(std::span<const int64_t> x, std::span<const int64_t> y, uint64_t k) {
    assert(!x.empty() && !y.empty() && k >= 1 && k <= x.size() * y.size());
    using Wide = __int128; // y_j - x_i of any two int64 values
    // How many y_j - x_i <= d: for each y_j, the x_i >= y_j - d, whose first
    // index only grows with j.
    auto at_or_below = [&](Wide d) {
        uint64_t n = 0;
        size_t i = 0;
        for (int64_t v : y) {
            while (i < x.size() && Wide{x[i]} < Wide{v} - d)
                i++;
            n += x.size() - i;
        }
        return n;
    };
    Wide lo = Wide{y.front()} - x.back(), hi = Wide{y.back()} - x.front();
    while (lo < hi) {
        Wide mid = lo + (hi - lo) / 2;
        if (at_or_below(mid) >= k)
            hi = mid;
        else
            lo = mid + 1;
    }
    return static_cast<int64_t>(std::clamp<Wide>(lo, std::numeric_limits<int64_t>::min(),
                                                 std::numeric_limits<int64_t>::max()));
}

Shift hodges_lehmann(std::span<const int64_t> x, std::span<const int64_t> y, double confidence) {
    const uint64_t m = x.size() * y.size();
    Shift s{};
    s.estimate = m % 2 ? static_cast<double>(kth_difference(x, y, m / 2 + 1))
                       : (static_cast<double>(kth_difference(x, y, m / 2)) +
                          static_cast<double>(kth_difference(x, y, m / 2 + 1))) /
                             2;
    double sd = mann_whitney(x, y).sd;
    if (sd <= 0)
        return s;
    double c = std::floor(static_cast<double>(m) / 2 - normal_quantile(confidence) * sd);
    if (c < 1)
        return s;
    s.low = kth_difference(x, y, static_cast<uint64_t>(c));
    s.high = kth_difference(x, y, m + 1 - static_cast<uint64_t>(c));
    return s;
}

namespace {

// The root in [lo, hi] of an increasing f, to double precision.
template <class F> double bisect(F f, double target, double lo, double hi) {
    for (int i = 0; i < 200 && lo < hi; i++) {
        double mid = lo + (hi - lo) / 2;
        if (mid == lo || mid == hi)
            break;
        (f(mid) < target ? lo : hi) = mid;
    }
    return lo + (hi - lo) / 2;
}

} // namespace

double normal_quantile(double confidence) {
    assert(confidence > 0 && confidence < 1);
    return bisect([](double z) { return std::erf(z / std::numbers::sqrt2); }, confidence, 0, 40);
}

double student_t_quantile(double confidence, int df) {
    assert(confidence > 0 && confidence < 1 && df >= 1);
    // P(|T| <= t) as a function of theta = atan(t / sqrt(df)): a finite
    // sum of powers of cos(theta), odd or even as df is.
    auto central = [df](double theta) {
        double c2 = std::cos(theta) * std::cos(theta), sum = 0;
        if (df % 2) {
            double term = std::cos(theta);
            for (int k = 1; 2 * k + 1 <= df; k++) {
                sum += term;
                term *= c2 * (2.0 * k) / (2.0 * k + 1);
            }
            return 2 / std::numbers::pi * (theta + std::sin(theta) * sum);
        }
        double term = 1;
        for (int k = 1; 2 * k <= df; k++) {
            sum += term;
            term *= c2 * (2.0 * k - 1) / (2.0 * k);
        }
        return std::sin(theta) * sum;
    };
    double theta = bisect(central, confidence, 0, std::numbers::pi / 2);
    return std::sqrt(static_cast<double>(df)) * std::tan(theta);
}

} // namespace busprof
