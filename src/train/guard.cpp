#include "pitrain/guard.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <utility>
#include <vector>

#include "pitrain/clock.h"

namespace pitrain {
namespace {

// What the watchdog names: a step, or the start-up before the first step (step -1).
std::string stall_point(int64_t step) {
  return step < 0 ? std::string("start-up (data loading, weight broadcast)")
                  : "step " + std::to_string(step);
}

}  // namespace

StallWatchdog::StallWatchdog(double timeout_seconds, const Comm& comm, std::string stalled_file)
    : timeout_(timeout_seconds),
      comm_(comm),
      stalled_file_(std::move(stalled_file)),
      last_beat_(seconds_now()) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  reports_ = timeout_ > 0 && level == MPI_THREAD_MULTIPLE && comm.size() > 1;
  // Made at once, empty: `pitrain elastic` times a stalled start-up from here, after this
  // watchdog's.
  if (reports_ && comm.rank() == 0 && !stalled_file_.empty()) std::ofstream(stalled_file_).close();
  if (timeout_ > 0) thread_ = std::thread(&StallWatchdog::watch, this);
}

StallWatchdog::~StallWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StallWatchdog::beat(int64_t step) {
  step_ = step;
  last_beat_ = seconds_now();
}

void StallWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopping_; })) {
    const double stalled = seconds_now() - last_beat_;
    if (stalled < timeout_) continue;
    const std::string what = stall_point(step_.load());
    std::fprintf(
        stderr,
        "pitrain: error (rank %d): %s has not completed in %.0f s (--stall-timeout): a rank died, "
        "hung or lost its network link; ending the job (resume from the last checkpoint with "
        "--resume)\n",
        comm_.rank(), what.c_str(), stalled);
    std::fflush(stderr);
    if (reports_)
      report_to_rank0(step_.load());  // the other ranks have said the same by its end
    else
      std::this_thread::sleep_for(std::chrono::seconds(2));  // let the other ranks say the same
    std::_Exit(1);
  }
}

// Each stalled rank that is waiting in MPI sends its step to rank 0; rank 0 collects for a
// window of half the stall timeout (2 to 4 s) and names the ranks that sent nothing (dead, stopped
// or cut off) or were computing. The others stay a second longer: mpirun ends every rank once one
// exits, which would cut rank 0's report short. The job ends well before `pitrain elastic` would
// end it (stall timeout + 5 s).
void StallWatchdog::report_to_rank0(int64_t step) {
  const double deadline = seconds_now() + std::clamp(timeout_ / 2, 2.0, 4.0);
  int64_t mine[2] = {step, comm_.in_mpi() ? 1 : 0};
  if (comm_.rank() != 0) {
    MPI_Request request;
    MPI_Isend(mine, 2, MPI_INT64_T, 0, kStallReportTag, comm_.raw(), &request);
    for (int done = 0; !done && seconds_now() < deadline;
         std::this_thread::sleep_for(std::chrono::milliseconds(20)))
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    while (seconds_now() < deadline + 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return;
  }
  std::vector<char> waiting(size_t(comm_.size()), 0);
  waiting[0] = char(mine[1]);
  for (int heard = 1; heard < comm_.size() && seconds_now() < deadline;) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kStallReportTag, comm_.raw(), &flag, &status);
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    int64_t theirs[2];
    MPI_Recv(theirs, 2, MPI_INT64_T, status.MPI_SOURCE, kStallReportTag, comm_.raw(),
             MPI_STATUS_IGNORE);
    waiting[size_t(status.MPI_SOURCE)] = char(theirs[1]);
    ++heard;
  }
  std::string missing, numbers;
  for (int r = 0; r < comm_.size(); ++r)
    if (!waiting[size_t(r)]) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      numbers += std::to_string(r) + " ";
    }
  std::fprintf(
      stderr,
      "pitrain: error: %s stalled; ranks that had not arrived: %s (the others waited for them)\n",
      stall_point(step).c_str(), missing.empty() ? "none found" : missing.c_str());
  std::fflush(stderr);
  if (!stalled_file_.empty()) std::ofstream(stalled_file_) << numbers << "\n";
}

std::string first_non_finite_layer(const Model& model) {
  return first_non_finite_layer(model, model.grads());
}

std::string first_non_finite_layer(const Model& model, const std::vector<float>& g) {
  const auto bad = std::find_if(g.begin(), g.end(), [](float v) { return !std::isfinite(v); });
  if (bad == g.end()) return "";  // the every-step case: one pass, nothing allocated
  const int64_t at = bad - g.begin();
  size_t layer = 0;
  while (layer + 1 < model.layers().size() && model.param_offset(layer + 1) <= at) ++layer;
  return model.layer_names()[layer];
}

}  // namespace pitrain
