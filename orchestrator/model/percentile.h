// The one percentile definition every figure uses: nearest rank (the smallest sample with at
// least q % of the samples at or below it). p99 of 100 samples is the 99th smallest, not the
// largest; p0 is the smallest, p100 the largest.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace rocelab::model {

// `sorted` ascending; 0 when empty.
template <class T>
T percentile_sorted(const std::vector<T>& sorted, double q) {
  if (sorted.empty()) return T{};
  const double rank = std::ceil(std::clamp(q, 0.0, 100.0) / 100.0 * double(sorted.size()));
  const size_t i = rank < 1 ? 0 : std::min(sorted.size(), size_t(rank)) - 1;
  return sorted[i];
}

// The same rank by selection (linear, reorders `v`): for a loop that must not sort a million.
template <class T>
T percentile_select(std::vector<T>& v, double q) {
  if (v.empty()) return T{};
  const double rank = std::ceil(std::clamp(q, 0.0, 100.0) / 100.0 * double(v.size()));
  const size_t i = rank < 1 ? 0 : std::min(v.size(), size_t(rank)) - 1;
  std::nth_element(v.begin(), v.begin() + long(i), v.end());
  return v[i];
}

template <class T>
T percentile(std::vector<T> v, double q) {
  std::sort(v.begin(), v.end());
  return percentile_sorted(v, q);
}

}  // namespace rocelab::model
