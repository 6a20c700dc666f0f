// Which strategy the options ask for: the one place that lists them.
#include "pitrain/sync.h"

namespace pitrain {

std::unique_ptr<SyncStrategy> make_local_sgd(Comm& comm, const float* params, int64_t n,
                                             const SyncOptions& opts,
                                             const std::vector<WireMatrix>& matrices);

namespace {

// One rank: its gradients are the average already.
class SoloSync : public SyncStrategy {
 public:
  using SyncStrategy::SyncStrategy;
  void gradients_ready(float*, int64_t, int64_t) override {}
  bool reduce_gradients(float*, int64_t, Optimizer& opt) override {
    opt.set_noise_share(1.0f);
    return true;
  }
  void after_update(float*, int64_t) override {}
  void agree(float*, int64_t) override {}
  bool votes_at(int64_t) const override { return true; }
};

}  // namespace

std::unique_ptr<SyncStrategy> make_sync_strategy(Comm& comm, const float* params, int64_t n_params,
                                                 const SyncOptions& opts,
                                                 const std::vector<WireMatrix>& matrices) {
  if (comm.size() == 1) return std::make_unique<SoloSync>(comm);
  if (opts.sync_every == 1) return std::make_unique<PerStepSync>(comm, n_params, opts, matrices);
  return make_local_sgd(comm, params, n_params, opts, matrices);
}

std::vector<WireMatrix> weight_matrices(const Model& model) {
  std::vector<WireMatrix> out;
  for (size_t l = 0; l < model.layers().size(); ++l)
    for (const ParamView& p : model.layers()[l]->params())
      if (p.shape.size() >= 2)
        out.push_back(
            {model.param_offset(l) + p.offset, p.size() / p.shape.back(), p.shape.back()});
  return out;
}

}  // namespace pitrain
