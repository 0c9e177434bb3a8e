// SPDX-License-Identifier: GPL-2.0-only
#include "compare.h"

#include <algorithm>
#include <cassert>
#include <cmath>

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

} // namespace busprof
