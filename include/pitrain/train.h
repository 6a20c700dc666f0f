// The data-parallel fit loop (Keras' fit under mpirun), validation and evaluation.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "pitrain/comm.h"
#include "pitrain/dataset.h"
#include "pitrain/model.h"
#include "pitrain/optimizer.h"
#include "pitrain/sync.h"

namespace pitrain {

struct TrainOptions {
  std::string data;
  std::string model = "cnn";
  std::string optimizer = "adam";
  int epochs = 1;
  int64_t steps_per_epoch = 0;  // 0: one pass over the largest rank slice
  int batch_size = 32;          // per rank
  float lr = 1e-3f;
  float momentum = 0.0f;        // sgd only
  std::string lr_scaling = "none";  // or "linear": lr x ranks, reached by a linear warm-up
  double warmup_epochs = 0;
  uint64_t seed = 0;
  int threads = 0;              // 0: the node's cores / ranks on the node
  std::string checkpoint;       // written every checkpoint_every epochs and at the end
  int checkpoint_every = 1;
  std::string resume;
  std::string log_csv;
  bool json = false;
  int expect_ranks = 0;         // fail fast unless started as this many ranks (0: any)
  double stall_timeout = 300;   // seconds a step may take before the job is ended (0: never)
  SyncOptions sync;             // per-step gradient averaging unless told otherwise
};

struct EpochResult {
  int epoch = 0;
  double loss = 0, accuracy = 0, val_loss = 0, val_accuracy = 0;
  double seconds = 0, mpi_seconds = 0;
  int64_t bytes_sent = 0;  // by this rank, to collectives
};

struct TrainResult {
  std::vector<EpochResult> epochs;
  std::vector<float> params;  // final weights
};

// One data-parallel step (number `step`, 0-based): forward and backward on this rank's batch,
// the gradients averaged over the ranks (one allreduce of the flat buffer, or its buckets), then
// the same optimizer step on every rank; with local SGD, the parameters averaged every K steps.
LossStats train_step(Model& model, Optimizer& opt, GradientSync& sync, const float* x, const int32_t* y, int n,
                     float lr, const Context& ctx, int64_t step);

// Trains as the options say; rank 0 prints progress to `out`.
TrainResult fit(const TrainOptions& opts, Comm& comm, std::ostream& out);

struct Evaluation {
  int classes = 0;
  int64_t count = 0;
  double loss = 0, accuracy = 0;
  std::vector<int64_t> confusion;  // (classes, classes): row = true label, column = prediction
};

// Every rank evaluates its slice; the sums are allreduced, so every rank gets the whole figure.
Evaluation evaluate(Model& model, const Split& local, Comm& comm);

// Rank 0's Keras-style progress: a live bar on a terminal, one line an epoch otherwise.
class ProgressBar {
 public:
  ProgressBar(std::ostream& out, bool enabled);
  void start_epoch(int epoch, int epochs, int64_t steps);
  void update(int64_t step, double loss, double accuracy, double seconds, double mpi_share);
  void end_epoch(const EpochResult& r, int64_t steps);

 private:
  std::string bar(int64_t step) const;
  std::ostream& out_;
  bool enabled_, live_;
  int epoch_ = 0, epochs_ = 0;
  int64_t steps_ = 0;
  double last_draw_ = -1;
};

}  // namespace pitrain
