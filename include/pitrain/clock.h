// Timing: seconds on a steady clock, the process's start on it (and the job's, when the launcher
// gives it), and the order statistic of a set of timings that the start-up probes (--sync auto)
// and the benchmarks report.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "pitrain/error.h"

namespace pitrain {

inline double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// seconds_now() when the process started (static initialisation, before main and MPI_Init):
// where a run's start-up and wall time count from.
inline const double process_start_seconds = seconds_now();

// The job's start on seconds_now()'s clock, when the launcher gives it: PITRAIN_JOB_START, unix
// seconds with fractions as `date +%s.%N` prints them (bench/cluster.sh exports its time just
// before mpirun). The start-up and wall times then count from it, the launch of the processes
// included; never from after this process's start (this host's clock behind the launcher's).
// Empty when it is not set; throws UsageError for a value that is not such a time.
inline std::optional<double> launcher_start_seconds() {
  const char* text = std::getenv("PITRAIN_JOB_START");
  if (!text) return std::nullopt;
  char* end = nullptr;
  const double unix_start = std::strtod(text, &end);
  if (end == text || *end || !std::isfinite(unix_start) || unix_start <= 0)
    throw UsageError("PITRAIN_JOB_START=" + std::string(text) +
                     ": give the job's start in unix seconds, as `date +%s.%N` prints it, or "
                     "unset it");
  const double unix_now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return std::min(seconds_now() - (unix_now - unix_start), process_start_seconds);
}

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
