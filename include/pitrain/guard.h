// What keeps a training job from hanging or losing work: a stop request from SIGINT/SIGTERM
// that every rank agrees on, a stall watchdog, and a check for NaN/Inf gradients.
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

// While alive, SIGINT and SIGTERM only set a flag, so the fit loop can finish its step and
// write a checkpoint; a second signal ends the process as usual.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  int requested() const;  // 0, SIGINT or SIGTERM
};

// The ranks agree on stopping at the steps where they communicate anyway: a vote started at
// one such step is read at the next, so it never waits on the network by itself.
// The vote also carries rank 0's clock for --checkpoint-seconds: kSaveVote (1, below SIGINT's
// and SIGTERM's numbers, so a signal wins) asks every rank to save at the same step and go on;
// and, for local SGD that adapts its rounds, how long the rank that waited longest waited for its
// last round.
constexpr int kSaveVote = 1;
// round_wait of a vote when no round was timed (the same on every rank).
constexpr int kNotTimed = -1;
struct Vote {
  int signal = 0;      // 0, kSaveVote, SIGINT or SIGTERM: the largest wins
  int round_wait = 0;  // per mille of the last round's time spent waiting for it: the largest wins
};
// Votes travel on a communicator of their own: MPI matches the nonblocking collectives of a
// communicator in the order each rank starts them, and a PowerSGD round starts its second
// allreduce when this rank sees its first complete, at a step that may differ by rank (Open
// MPI 4.1 needs three or more progress calls for it, so a vote never came between them here).
// Collective: every rank makes one.
class StopVote {
 public:
  explicit StopVote(Comm& comm);
  ~StopVote();
  // Returns what the ranks voted at the previous vote (all 0 at the first); starts the next one.
  Vote exchange(Vote local);

 private:
  Comm& comm_;
  MPI_Comm votes_ = MPI_COMM_NULL;  // comm_'s ranks; MPI_COMM_NULL on one rank
  int vote_[2] = {0, 0};            // signal, round_wait
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// Thrown when the job stopped on a signal after writing its checkpoint; main exits with `code`.
struct Stopped {
  int code;
};

// Ends this rank (and so the job) when no step completes within `timeout_seconds`: a rank
// that died, hung or lost its link would otherwise leave the others waiting in a collective.
// Where MPI allows calls from several threads, the ranks that time out while waiting in MPI
// tell rank 0, which names the ranks that had not arrived, and writes their numbers to
// `stalled_file` ("": none; made empty when the watchdog starts) for `pitrain elastic`.
// Collective: every rank makes one.
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
  MPI_Comm reports_ = MPI_COMM_NULL;  // a duplicate, so reports never match training messages
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
