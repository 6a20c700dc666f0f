#include <algorithm>
#include <cmath>
#include <cstdint>
#if defined(__SSE__)
#include <immintrin.h>
#endif

#include "pitrain/image_files.h"
#include "pitrain/matrix.h"
#include "pitrain/threaded_model.h"

namespace pitrain {
namespace {

// to[lo, hi) += from[lo, hi)
void add(const float* from, float* to, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) to[i] += from[i];
}

}  // namespace

// By x86's streaming stores where the build has them: they write whole lines to memory without
// first taking them back from the cores that read the last copy, and leave none behind in the
// writer's cache, so that the reader's next writes there take no line back from the writer either
// (bench/compute.sh's busy neighbour: faster than std::copy).
void ThreadedModel::copy_for_another_core(const float* src, float* dst, int64_t n) {
#if defined(__SSE__)
  int64_t i = 0;
  for (; i < n && reinterpret_cast<uintptr_t>(dst + i) % 16 != 0; ++i) dst[i] = src[i];
  for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = src[i];
  _mm_sfence();  // streaming stores are weakly ordered: done before another thread is told
#else
  std::copy(src, src + n, dst);
#endif
}

// Each thread's GEMMs run on that thread alone: OpenBLAS' own workers would compete with ours.
ThreadedModel::ThreadedModel(Model& model, ThreadPool& pool)
    : model_(model),
      pool_(pool),
      prepared_batch_(size_t(pool.size())),
      flops_per_row_per_param_(3.0 * double(model.forward_flops()) / double(model.num_params())),
      bytes_per_row_(double(model.activation_floats()) * sizeof(float)) {
  set_gemm_threads(1);
}

ThreadedModel::~ThreadedModel() { pool_.withdraw_posted(); }

int ThreadedModel::shares(int n) const {
  const int for_threads = pool_.size() > 1 ? 2 * pool_.size() : 1;
  const int for_cache = int(std::ceil(double(n) * bytes_per_row_ / double(kShareBytes)));
  // No empty share.
  const int most = std::min(int(double(n) * flops_per_row_per_param_ / kMinFlopsPerParam), n);
  return std::clamp(std::max(for_threads, for_cache), 1, std::max(most, 1));
}

void ThreadedModel::reserve(int batch) {
  pool_.withdraw_posted();  // the workers' scratch changes
  const int count = shares(batch);
  add_scratch(count);
  const int threads = count > 1 ? pool_.size() : 1;
  for (int t = 0; t < threads; ++t) of_thread(t).reserve((batch + count - 1) / count);
  // Here, where a lack of memory shows at the start.
  if (count > 1 && pool_.size() > 1) add_backup_scratch(count);
}

void ThreadedModel::add_scratch(int count) {
  if (count > 1 && pool_.size() > 1 && copies_.empty())
    while (int(copies_.size()) + 1 < pool_.size())
      copies_.push_back(Model::reading_params(model_, model_.params().data()));
  while (int(share_grads_.size()) + 1 < count)
    share_grads_.emplace_back(size_t(model_.num_params()));
  if (int(stats_.size()) < count) stats_.resize(size_t(count));
}

void ThreadedModel::for_each_share(int n, const Share& share) {
  const int count = shares(n);
  add_scratch(count);
  ++batches_;
  auto first = [&](int s) { return first_row(n, count, s); };
  auto share_job = [&](int s, int t) {
    const bool prepared = prepared_batch_[size_t(t)] == batches_;
    prepared_batch_[size_t(t)] = batches_;
    // Each thread binds its own scratch.
    if (!prepared && t != 0) of_thread(t).read_params(model_.params().data());
    share(of_thread(t), s, first(s), first(s + 1) - first(s), prepared);
  };
  // Inference, or training that found the cores free just before: no worker to wait for.
  if (pool_.crowded()) {
    for (int s = 0; s < count; ++s) share_job(s, 0);
  } else {
    pool_.run_on_threads(count, share_job);
  }
}

LossStats ThreadedModel::share_forward_backward(Model& scratch, const float* x, const int32_t* y,
                                                int n, int count, int s, const Context& ctx,
                                                bool prepared) {
  const int first = first_row(n, count, s), rows = first_row(n, count, s + 1) - first;
  Context share = ctx;
  share.first_row = first, share.batch_rows = n, share.prepared = prepared;
  share.pool = nullptr;  // a share runs on its thread alone: the pool is busy with the shares
  return scratch.forward_backward(x + first * model_.input_floats(), y + first, rows, share);
}

LossStats ThreadedModel::sum_stats(int count) const {
  LossStats total;
  for (int s = 0; s < count; ++s)
    total.loss_sum += stats_[size_t(s)].loss_sum, total.correct += stats_[size_t(s)].correct;
  return total;
}

void ThreadedModel::add_shares(int count, int64_t lo, int64_t hi) {
  for (int s = 1; s < count; ++s) add(grads_of_share(s), model_.grads().data(), lo, hi);
}

LossStats ThreadedModel::forward_backward(const float* x, const int32_t* y, int n,
                                          const Context& ctx, const Model::GradientsReady& ready) {
  const int count = shares(n);
  if (count == 1) {
    Context whole = ctx;
    whole.pool = &pool_;
    return model_.forward_backward(x, y, n, whole, ready);
  }
  ++split_batches_;
  if (pool_.crowded() && pool_.size() > 1) {
    ++crowded_batches_;
    const LossStats stats = forward_backward_crowded(x, y, n, ctx);
    if (ready) ready(0);
    return stats;
  }
  struct OwnGrads {  // thread 0's scratch is the model: its layers point at grads() again after
    Model& m;
    ~OwnGrads() { m.bind_grads(m.grads().data()); }
  } own_grads{model_};
  for_each_share(n, [&](Model& scratch, int s, int, int, bool prepared) {
    scratch.bind_grads(grads_of_share(s));
    stats_[size_t(s)] = share_forward_backward(scratch, x, y, n, count, s, ctx, prepared);
  });
  // Share 0's buffer gets the sum of the shares', each element added in share order.
  pool_.run_ranges(model_.num_params(), [&](int64_t lo, int64_t hi) { add_shares(count, lo, hi); });
  if (ready) ready(0);
  return sum_stats(count);
}

void ThreadedModel::forward(const float* x, int n, const ShareLogits& share) {
  for_each_share(n, [&](Model& scratch, int s, int first, int rows, bool prepared) {
    Context ctx;
    ctx.prepared = prepared;
    share(s, scratch.forward(x + first * model_.input_floats(), rows, ctx), first, rows);
  });
}

}  // namespace pitrain
