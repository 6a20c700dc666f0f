// Checkpoints (HDF5): the weights under /model_weights in Keras' own layout, which Keras'
// model.load_weights("x.h5") reads (/model_weights/conv2d/conv2d/kernel:0, ...), optimizer
// state under /optimizer_weights, and the run state as root attributes.
// Written to a temporary file of the writer's own (paths.h: temp_path_beside), flushed, fsynced
// and renamed: the old file survives any crash, and two writers of one file never share one.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pitrain/model.h"
#include "pitrain/optimizer.h"

namespace pitrain {

struct RunState {
  int64_t epoch = 0;       // epochs completed
  int64_t step = 0;        // optimizer steps taken
  int64_t epoch_step = 0;  // steps taken in the unfinished epoch after `epoch` (a stop mid-epoch)
  uint64_t seed = 0;       // with the above, the whole RNG state (all draws are counter-based)
  // Of the run that saved it (0: a checkpoint from before it was kept).
  int64_t steps_per_epoch = 0;
};

void save_checkpoint(const std::string& path, const Model& model, Optimizer& opt,
                     const RunState& state, const std::vector<std::string>& class_names);

struct Checkpoint {
  Model model;
  std::vector<std::string> class_names;
  RunState state;
  std::string optimizer;
  int64_t iterations = 0;
  std::map<std::string, std::vector<float>> optimizer_state;
};

// `batch`: the rows its model will run at once (train's --batch-size, evaluate's kEvalBatch;
// predict and serve run one image at a time). Every weight's presence and shape, and the memory of
// the parameters and that batch's activations, are checked before the model is built.
Checkpoint load_checkpoint(const std::string& path, int batch = 1);

// Copies the saved optimizer state into `opt`; throws when it belongs to another optimizer.
void restore_optimizer(const Checkpoint& ckpt, Optimizer& opt, const std::string& path);

}  // namespace pitrain
