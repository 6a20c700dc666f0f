// Checkpoints written behind the training: save() copies the weights and optimizer state
// (0.8 MB for `mlp`, 0.3 MB for `cnn`, Adam's m and v included) and returns; a thread of its
// own writes, fsyncs and renames the file (checkpoint.h) while the steps go on. A streamed slice
// reads HDF5 meanwhile, on threads of its own: that needs a thread-safe HDF5, as Debian's serial
// one is (load_rank_slice refuses to stream without one).
#pragma once
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pitrain/checkpoint.h"

namespace pitrain {

class CheckpointWriter {
 public:
  CheckpointWriter(const Model& model, const Optimizer& opt, std::vector<std::string> class_names);
  // Waits for the write under way; its error is dropped (we are failing already).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  // Waits for the previous write (throwing its error), copies the state, starts writing `path`.
  void save(const std::string& path, const Model& model, Optimizer& opt, const RunState& state);
  // Waits for the write under way; throws its error (an Error naming the file).
  void wait();

 private:
  Model model_;                     // the copy being written
  std::unique_ptr<Optimizer> opt_;  // its optimizer state
  std::vector<std::string> class_names_;
  std::thread thread_;
  std::exception_ptr error_;
};

}  // namespace pitrain
