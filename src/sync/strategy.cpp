// Which strategy the options ask for: the one place that lists them.
#include "pitrain/sync.h"

#include "pitrain/error.h"

namespace pitrain {

std::unique_ptr<SyncStrategy> make_per_step(Comm& comm, const float* params, int64_t n,
                                            const SyncOptions& opts,
                                            const std::vector<WireMatrix>& matrices);
std::unique_ptr<SyncStrategy> make_local_sgd(Comm& comm, const float* params, int64_t n,
                                             const SyncOptions& opts,
                                             const std::vector<WireMatrix>& matrices);

namespace {

using MakeSync = std::unique_ptr<SyncStrategy> (*)(Comm&, const float*, int64_t, const SyncOptions&,
                                                   const std::vector<WireMatrix>&);

struct SyncEntry {
  const char* name;  // --sync NAME
  const char* what;  // for --help
  MakeSync make;
};

// The strategies by name: a new one is a row here and a file of its own.
const SyncEntry kSyncStrategies[] = {
    {"per-step", "average the gradients every step", make_per_step},
    {"local-sgd", "K steps alone, then average what the ranks learnt (--sync-every K)",
     make_local_sgd},
};

// One rank: its gradients are the average already.
class SoloSync : public SyncStrategy {
 public:
  void gradients_ready(float*, int64_t, int64_t) override {}
  bool reduce_gradients(float*, int64_t, Optimizer& opt) override {
    opt.set_noise_share(1.0f);
    return true;
  }
  void after_update(float*, int64_t) override {}
  void agree(float*, int64_t) override {}
  bool meets_at(int64_t) const override { return true; }
};

}  // namespace

std::vector<std::pair<std::string, std::string>> sync_strategies() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const SyncEntry& e : kSyncStrategies) out.emplace_back(e.name, e.what);
  return out;
}

std::unique_ptr<SyncStrategy> make_sync_strategy(Comm& comm, const float* params, int64_t n_params,
                                                 const SyncOptions& opts,
                                                 const std::vector<WireMatrix>& matrices) {
  if (comm.size() == 1) return std::make_unique<SoloSync>();
  for (const SyncEntry& e : kSyncStrategies)
    if (opts.strategy == e.name) return e.make(comm, params, n_params, opts, matrices);
  throw UsageError("--sync " + opts.strategy + ": no such strategy");
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
