#include <algorithm>

#include "pitrain/image_files.h"
#include "pitrain/matrix.h"
#include "pitrain/threads.h"

namespace pitrain {

// Each thread's GEMMs run on that thread alone: OpenBLAS' own workers would compete with ours.
ThreadedModel::ThreadedModel(Model& model, ThreadPool& pool)
    : model_(model), pool_(pool), stats_(static_cast<size_t>(pool.size())) {
  set_gemm_threads(1);
  for (int t = 1; t < pool.size(); ++t) copies_.push_back(Model::sharing_params(model));
}

int ThreadedModel::shares(int n) const { return std::clamp(n / kMinRowsPerThread, 1, pool_.size()); }

void ThreadedModel::reserve(int batch) {
  const int count = shares(batch);
  for (int t = 0; t < count; ++t) on_thread(t).reserve((batch + count - 1) / count);
}

LossStats ThreadedModel::forward_backward(const float* x, const int32_t* y, int n, const Context& ctx,
                                          const Model::GradientsReady& ready) {
  const int count = shares(n);
  if (count == 1) return model_.forward_backward(x, y, n, ctx, ready);
  pool_.run(count, [&](int t) {
    const int first = n * t / count, rows = n * (t + 1) / count - first;
    Context share = ctx;
    share.first_row = first, share.batch_rows = n;
    stats_[size_t(t)] = on_thread(t).forward_backward(x + int64_t(first) * kImagePixels, y + first, rows, share);
  });
  // Thread 0's buffer gets the sum, each element added in thread order.
  float* sum = model_.grads().data();
  pool_.run_ranges(model_.num_params(), [&](int64_t lo, int64_t hi) {
    for (int t = 1; t < count; ++t) {
      const float* g = on_thread(t).grads().data();
      for (int64_t i = lo; i < hi; ++i) sum[i] += g[i];
    }
  });
  if (ready) ready(0);
  LossStats total;
  for (int t = 0; t < count; ++t) total.loss_sum += stats_[size_t(t)].loss_sum, total.correct += stats_[size_t(t)].correct;
  return total;
}

void ThreadedModel::forward(const float* x, int n, const ShareLogits& share) {
  const int count = shares(n);
  pool_.run(count, [&](int t) {
    const int first = n * t / count, rows = n * (t + 1) / count - first;
    share(t, on_thread(t).forward(x + int64_t(first) * kImagePixels, rows, Context{}), first, rows);
  });
}

}  // namespace pitrain
