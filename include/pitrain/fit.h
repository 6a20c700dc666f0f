// The data-parallel fit loop: Keras' fit under mpirun. Every rank trains on its own slice of
// the data; the sync strategy (sync.h) decides how the ranks' models meet.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "pitrain/comm.h"
#include "pitrain/dataset.h"
#include "pitrain/model.h"
#include "pitrain/optimizer.h"
#include "pitrain/sync.h"
#include "pitrain/threaded_model.h"

namespace pitrain {

// What `pitrain train` was asked for; the command line checks the values (cli/train.cpp).
struct TrainOptions {
  std::string data;
  std::string model = "cnn";  // with resume: "" continues the checkpoint's; another model fails
  std::string optimizer = "adam";
  int epochs = 1;
  int64_t steps_per_epoch = 0;  // 0: one pass over the largest rank slice
  int batch_size = 32;          // per rank
  float lr = 1e-3f;
  float momentum = 0.0f;            // sgd only
  std::string lr_scaling = "none";  // lr_scale()'s rule, reached by a linear warm-up
  double warmup_epochs = 0;
  uint64_t seed = 0;
  int threads = 0;         // 0: the node's cores / ranks on the node
  std::string checkpoint;  // written every checkpoint_every epochs and at the end
  int checkpoint_every = 1;
  int64_t checkpoint_every_steps = 0;  // also every this many steps (0: not by steps)
  double checkpoint_seconds = 0;  // also when this long has passed since the last (0: not by time)
  std::string progress_file;  // rank 0 rewrites it with the steps taken, up to 10 times a second
  std::string resume;
  std::string log_csv;
  bool json = false;
  int expect_ranks = 0;        // fail fast unless started as this many ranks (0: any)
  double stall_timeout = 300;  // seconds a step may take before the job is ended (0: never)
  int64_t data_memory = kDefaultDataMemory;  // bytes of data a rank holds; more is streamed
  SyncOptions sync;                          // per-step gradient averaging unless told otherwise
  bool sync_auto = false;  // measure the link and a step, then choose `sync` (sync.h)
};

struct EpochResult {
  int epoch = 0;
  double loss = 0, accuracy = 0, val_loss = 0, val_accuracy = 0;
  double seconds = 0, mpi_seconds = 0;
  int64_t steps = 0;        // run in this epoch (fewer after a resume mid-epoch)
  int64_t bytes_sent = 0;   // by this rank, to collectives
  int64_t collectives = 0;  // allreduces this rank started
  int sync_every = 1;       // steps between the ranks' meetings at the epoch's end
};

// An epoch's seconds as the job's clock sees them: the slowest rank's `seconds` (collective).
double slowest_rank_seconds(Comm& comm, double seconds);

struct TrainResult {
  std::vector<EpochResult> epochs;
  std::vector<float> params;  // final weights
};

struct StepResult {
  LossStats stats;
  bool grads_shared = false;  // the gradients the optimizer followed were the same on every rank
  bool grads_finite = true;   // none of them was NaN or Inf
};

// One data-parallel step (number `step`, 0-based): forward and backward on this rank's batch
// (split across its threads), the gradients met as the strategy says, then the optimizer step.
StepResult train_step(ThreadedModel& threaded, Optimizer& opt, SyncStrategy& sync, const float* x,
                      const int32_t* y, int n, float lr, const Context& ctx, int64_t step);

// Trains as the options say; rank 0 prints progress to `out`.
TrainResult fit(const TrainOptions& opts, Comm& comm, std::ostream& out);

}  // namespace pitrain
