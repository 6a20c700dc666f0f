// What a run does between its steps besides training: the stop that SIGINT, SIGTERM and
// `pitrain elastic` ask for, agreed by every rank; checkpoints by epochs, steps and seconds; the
// progress file. fit() owns one. The sync strategy says after which steps the ranks meet anyway
// (SyncStrategy::meets_at), and the vote rides on those, so it never waits on the network alone.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pitrain/checkpoint.h"
#include "pitrain/checkpoint_writer.h"
#include "pitrain/comm.h"
#include "pitrain/fit.h"
#include "pitrain/progress.h"
#include "pitrain/sync.h"

namespace pitrain {

// While alive, SIGINT and SIGTERM only set a flag, so the fit loop can finish its step and
// write a checkpoint; a second signal ends the process as usual.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  int requested() const;  // 0, SIGINT or SIGTERM
};

// A vote started at one meeting is read at the next. kSaveVote (1, below SIGINT's and
// SIGTERM's numbers, so a signal wins) asks every rank to save at the same step and go on: rank
// 0's clock for --checkpoint-seconds. The vote also carries, for local SGD that adapts its
// rounds, how long the rank that waited longest waited for its last round.
constexpr int kSaveVote = 1;
struct Vote {
  int signal = 0;      // 0, kSaveVote, SIGINT or SIGTERM: the largest wins
  int round_cost = 0;  // SyncStrategy::take_round_cost(): the largest wins
};

// Votes travel on a communicator of their own: MPI matches the nonblocking collectives of a
// communicator in the order each rank starts them, and a PowerSGD round starts its second
// allreduce when this rank sees its first complete, at a step that may differ by rank.
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
  int vote_[2] = {0, 0};            // signal, round_cost
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// Thrown when the job stopped on a signal after writing its checkpoint; main exits with `code`.
struct Stopped {
  int code;
};

// What the ranks agreed after a step.
struct StepDecision {
  int stop = 0;       // SIGINT or SIGTERM: every rank stops after this step
  bool save = false;  // a checkpoint is due by steps or seconds
};

class RunControl {
 public:
  // Collective. `state` is the run's, read at every save.
  RunControl(const TrainOptions& o, Comm& comm, SyncStrategy& sync, Model& model, Optimizer& opt,
             const RunState& state, const std::vector<std::string>& class_names);
  // After global step `step` (0-based; state.step counts it already).
  StepDecision after_step(int64_t step);
  // Whether the end of `epoch` saves: by --checkpoint-every, at the last epoch, or a save by steps
  // or seconds that fell on the epoch's last step (`due`).
  bool saves_at_end(int epoch, bool due) const;
  // Rank 0 hands its state to the background writer; every rank learns that it could, or with
  // `wait` that the file is on disk. Throws JointError on every rank when rank 0 failed.
  void save(const std::string& path, bool wait);
  // The ranks agree on one model, save it to --checkpoint (or pitrain-stopped.h5), report, and
  // throw Stopped.
  [[noreturn]] void stop(int signal, int epoch, TrainReport& report);
  // Waits for the last background write: its failure, when no save came after it.
  void finish();

 private:
  const TrainOptions& o_;
  Comm& comm_;
  SyncStrategy& sync_;
  Model& model_;
  Optimizer& opt_;
  const RunState& state_;
  std::optional<CheckpointWriter> writer_;  // rank 0's
  ProgressFile progress_file_;              // rank 0's
  StopSignals signals_;
  StopVote vote_;
  double last_save_;
  bool clock_asked_ = false;  // rank 0 has voted kSaveVote and waits for the vote to come back
};

}  // namespace pitrain
