// Timing: seconds on a steady clock, the process's start on it, and the order statistic of a set of
// timings that the start-up probes (--sync auto) and the benchmarks report.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace pitrain {

inline double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// seconds_now() when the process started (static initialisation, before main and MPI_Init):
// where a run's start-up and wall time count from.
inline const double process_start_seconds = seconds_now();

// The nth smallest of `values`, from 0 (values.size() / 2: the median).
inline double nth_smallest(std::vector<double> values, size_t nth) {
  std::nth_element(values.begin(), values.begin() + std::ptrdiff_t(nth), values.end());
  return values[nth];
}

// The median of `values` (not empty): of an even count, the mean of the two middle ones.
inline double median(const std::vector<double>& values) {
  return (nth_smallest(values, (values.size() - 1) / 2) + nth_smallest(values, values.size() / 2)) /
         2;
}

}  // namespace pitrain
