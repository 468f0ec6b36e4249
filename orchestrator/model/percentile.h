// The one percentile definition every figure uses: nearest rank (the smallest sample with at
// least q % of the samples at or below it). p99 of 100 samples is the 99th smallest, not the
// largest; p0 is the smallest, p100 the largest.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
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

// The same nearest rank over samples that each stand for a share of something (a probe's ping
// for the stretch of time it took): the smallest sample with at least q % of the total weight
// at or below it. Equal weights give percentile(). 0 when empty or weightless; `weight` is
// as long as `v` (a missing weight counts 0).
inline double weighted_percentile(const std::vector<double>& v, const std::vector<double>& weight, double q) {
  std::vector<std::pair<double, double>> s;
  double total = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double w = i < weight.size() ? std::max(0.0, weight[i]) : 0.0;
    s.push_back({v[i], w});
    total += w;
  }
  if (total <= 0) return 0;
  std::sort(s.begin(), s.end());
  const double want = std::clamp(q, 0.0, 100.0) / 100.0 * total;
  double sum = 0;
  for (const auto& [x, w] : s) {
    sum += w;
    if (w > 0 && sum >= want * (1 - 1e-12)) return x;
  }
  return s.back().first;
}

}  // namespace rocelab::model

namespace rocelab::model {

// Latencies in a bounded space whatever their number (the PFC loop records every pause's):
// each power of two split into 64 buckets, so a percentile reads within 1/64 (1.6 %) above
// the true sample, and values below 128 exactly. The same nearest rank as above, answered by
// the rank's bucket's upper end (never below the sample; at most the largest seen).
class LogHistogram {
 public:
  void add(uint64_t v) {
    ++counts_[index(v)];
    ++n_;
    max_ = std::max(max_, v);
  }
  uint64_t count() const { return n_; }
  uint64_t max() const { return max_; }
  uint64_t percentile(double q) const {
    if (!n_) return 0;
    const double rank = std::ceil(std::clamp(q, 0.0, 100.0) / 100.0 * double(n_));
    const uint64_t want = rank < 1 ? 1 : std::min<uint64_t>(n_, uint64_t(rank));
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i)
      if ((seen += counts_[i]) >= want) return std::min(upper(i), max_);
    return max_;
  }

  static constexpr size_t kSub = 64, kBuckets = 2 * kSub + (64 - 7) * kSub;  // exact below 128; e = 7..63
  static size_t index(uint64_t v) {
    if (v < 2 * kSub) return size_t(v);
    const int e = 63 - __builtin_clzll(v);  // 7..63
    return size_t(e - 5) * kSub + size_t(v >> (e - 6)) - kSub;
  }
  static uint64_t upper(size_t i) {
    if (i < 2 * kSub) return i;
    const int e = int(i / kSub) + 5;
    const uint64_t m = i % kSub + kSub;  // 64..127: the top seven bits
    return e - 6 >= 57 && m == 127 ? ~uint64_t{0} : ((m + 1) << (e - 6)) - 1;
  }

 private:
  std::array<uint32_t, kBuckets> counts_{};
  uint64_t n_ = 0, max_ = 0;
};

}  // namespace rocelab::model
