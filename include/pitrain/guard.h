// What keeps a training job from hanging or losing work: a stall watchdog, and a check for
// NaN/Inf gradients.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "pitrain/comm.h"
#include "pitrain/model.h"

namespace pitrain {

// Ends this rank (and so the job) when no step completes within `timeout_seconds`: a rank
// that died, hung or lost its link would otherwise leave the others waiting in a collective.
// Where MPI allows calls from several threads, the ranks that time out while waiting in MPI
// tell rank 0, which names the ranks that had not arrived, and writes their numbers to
// `stalled_file` ("": none; made empty when the watchdog starts) for `pitrain elastic`.
// Local: make it before the run's first collective, which a rank cut off from the others stalls.
class StallWatchdog {
 public:
  StallWatchdog(double timeout_seconds, const Comm& comm, std::string stalled_file = "");
  ~StallWatchdog();
  void beat(int64_t step);  // progress: step `step` is starting

 private:
  void watch();
  void report_to_rank0(int64_t step);
  double timeout_;
  const Comm& comm_;
  std::string stalled_file_;
  // The ranks report to rank 0 (MPI allows calls from this thread): point to point on the job's
  // communicator with a tag of their own, so that nothing collective precedes the watchdog.
  bool reports_ = false;
  std::atomic<int64_t> step_{-1};
  std::atomic<double> last_beat_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

// The name of the first layer whose gradients hold NaN or Inf, or "" when all are finite.
std::string first_non_finite_layer(const Model& model);
// The same for any buffer laid out as the parameters (the weights of a loaded checkpoint).
std::string first_non_finite_layer(const Model& model, const std::vector<float>& flat);

}  // namespace pitrain
