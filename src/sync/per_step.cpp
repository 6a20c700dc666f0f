// Per-step sync: every step the ranks' gradients are averaged, so every rank takes the same
// optimizer step, as one process would with a P times larger batch. With overlap, each bucket
// of gradients starts its allreduce as soon as backward has made it.
#include "pitrain/sync.h"

namespace pitrain {

PerStepSync::PerStepSync(Comm& comm, int64_t n_params, const SyncOptions& opts,
                         const std::vector<WireMatrix>& matrices)
    : wire_(make_wire_average(opts.wire, comm, n_params, wire_options(opts, matrices))),
      bucket_(opts.overlap && !wire_->whole_vector() ? opts.bucket_bytes / int64_t(sizeof(float))
                                                     : 0),
      started_down_to_(n_params) {}

void PerStepSync::gradients_ready(float* grads, int64_t lo, int64_t) {
  if (bucket_ == 0) return;
  while (started_down_to_ - lo >= bucket_) {
    started_down_to_ -= bucket_;
    wire_->start(grads, started_down_to_, started_down_to_ + bucket_);
  }
  wire_->progress();
}

bool PerStepSync::reduce_gradients(float* grads, int64_t, Optimizer& opt) {
  if (started_down_to_ > 0) wire_->start(grads, 0, started_down_to_);
  const std::vector<float>& mean = wire_->finish();
  std::copy(mean.begin(), mean.end(), grads);
  started_down_to_ = wire_->size();
  opt.set_noise_share(1.0f);
  return true;
}

std::unique_ptr<SyncStrategy> make_per_step(Comm& comm, const float*, int64_t n,
                                            const SyncOptions& opts,
                                            const std::vector<WireMatrix>& matrices) {
  return std::make_unique<PerStepSync>(comm, n, opts, matrices);
}

}  // namespace pitrain
