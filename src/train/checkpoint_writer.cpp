#include "pitrain/checkpoint_writer.h"

#include <utility>

namespace pitrain {

CheckpointWriter::CheckpointWriter(const Model& model, const Optimizer& opt,
                                   std::vector<std::string> class_names)
    : model_(model.spec(), model.classes(), model.input_shape()),
      opt_(make_optimizer(opt.name(), model.num_params(), 0)),  // momentum: not part of the file
      class_names_(std::move(class_names)) {}

CheckpointWriter::~CheckpointWriter() {
  if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::save(const std::string& path, const Model& model, Optimizer& opt,
                            const RunState& state) {
  wait();
  model_.params() = model.params();
  auto from = opt.state();
  auto to = opt_->state();
  // The same optimizer: the same names.
  for (size_t i = 0; i < from.size(); ++i) *to[i].second = *from[i].second;
  opt_->iterations = opt.iterations;
  thread_ = std::thread([this, path, state] {
    try {
      save_checkpoint(path, model_, *opt_, state, class_names_);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void CheckpointWriter::wait() {
  if (thread_.joinable()) thread_.join();
  if (auto e = std::exchange(error_, nullptr)) std::rethrow_exception(e);
}

}  // namespace pitrain
