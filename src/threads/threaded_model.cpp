#include <algorithm>
#include <cmath>

#include "pitrain/image_files.h"
#include "pitrain/matrix.h"
#include "pitrain/threads.h"

namespace pitrain {

// Each thread's GEMMs run on that thread alone: OpenBLAS' own workers would compete with ours.
ThreadedModel::ThreadedModel(Model& model, ThreadPool& pool)
    : model_(model),
      pool_(pool),
      flops_per_row_per_param_(3.0 * double(model.forward_flops()) / double(model.num_params())),
      bytes_per_row_(double(model.activation_floats()) * sizeof(float)) {
  set_gemm_threads(1);
}

int ThreadedModel::shares(int n) const {
  const int for_threads = pool_.size() > 1 ? 2 * pool_.size() : 1;
  const int for_cache = int(std::ceil(double(n) * bytes_per_row_ / double(kShareBytes)));
  const int most = std::min(int(double(n) * flops_per_row_per_param_ / kMinFlopsPerParam), n);  // no empty share
  return std::clamp(std::max(for_threads, for_cache), 1, std::max(most, 1));
}

void ThreadedModel::reserve(int batch) {
  const int count = shares(batch);
  add_copies(count);
  for (int s = 0; s < count; ++s) of_share(s).reserve((batch + count - 1) / count);
}

void ThreadedModel::add_copies(int count) {
  while (int(copies_.size()) + 1 < count) copies_.push_back(Model::sharing_params(model_));
  if (int(stats_.size()) < count) stats_.resize(size_t(count));
}

void ThreadedModel::prepare() {
  const int parts = pool_.ranges(model_.prepared_floats());
  pool_.run(parts, [&](int part) { model_.prepare(part, parts); });
}

void ThreadedModel::for_each_share(int n, const std::function<void(int, int, int)>& share) {
  const int count = shares(n);
  add_copies(count);
  auto first = [&](int s) { return int(int64_t(n) * s / count); };  // n * s passes 2^31 at large batches
  pool_.run(count, [&](int s) { share(s, first(s), first(s + 1) - first(s)); });
}

LossStats ThreadedModel::forward_backward(const float* x, const int32_t* y, int n, const Context& ctx,
                                          const Model::GradientsReady& ready) {
  const int count = shares(n);
  if (count == 1) {
    Context whole = ctx;
    whole.pool = &pool_;
    return model_.forward_backward(x, y, n, whole, ready);
  }
  prepare();  // once for all shares
  for_each_share(n, [&](int s, int first, int rows) {
    Context share = ctx;
    share.first_row = first, share.batch_rows = n, share.prepared = true;
    stats_[size_t(s)] = of_share(s).forward_backward(x + int64_t(first) * kImagePixels, y + first, rows, share);
  });
  // Share 0's buffer gets the sum, each element added in share order.
  float* sum = model_.grads().data();
  pool_.run_ranges(model_.num_params(), [&](int64_t lo, int64_t hi) {
    for (int s = 1; s < count; ++s) {
      const float* g = of_share(s).grads().data();
      for (int64_t i = lo; i < hi; ++i) sum[i] += g[i];
    }
  });
  if (ready) ready(0);
  LossStats total;
  for (int s = 0; s < count; ++s) total.loss_sum += stats_[size_t(s)].loss_sum, total.correct += stats_[size_t(s)].correct;
  return total;
}

void ThreadedModel::forward(const float* x, int n, const ShareLogits& share) {
  prepare();
  Context ctx;
  ctx.prepared = true;
  for_each_share(n, [&](int s, int first, int rows) {
    share(s, of_share(s).forward(x + int64_t(first) * kImagePixels, rows, ctx), first, rows);
  });
}

}  // namespace pitrain
