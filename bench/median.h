// What the benchmark programs share: the median they report (machines are
// shared and noisy, so every figure is a median of several runs).
//
//   double seconds = bench::Median({0.31, 0.29, 0.35});  // 0.31
#ifndef MEMPLAN_BENCH_MEDIAN_H_
#define MEMPLAN_BENCH_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace memplan::bench {

// The median of `values` (the upper one of an even count); 0 when empty.
inline double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace memplan::bench

#endif  // MEMPLAN_BENCH_MEDIAN_H_
