#include <algorithm>
#include <cmath>
#include <cstdint>
#if defined(__SSE__)
#include <immintrin.h>
#endif

#include "pitrain/clock.h"
#include "pitrain/image_files.h"
#include "pitrain/matrix.h"
#include "pitrain/threads.h"

namespace pitrain {
namespace {

// dst = src (n floats), by x86's streaming stores where the build has them: they write whole
// lines to memory without first taking them back from the cores that read the last copy (kept
// by the one trial in slow minutes; in fast ones std::copy was as fast).
void copy_streaming(const float* src, float* dst, int64_t n) {
#if defined(__SSE__)
  int64_t i = 0;
  for (; i < n && reinterpret_cast<uintptr_t>(dst + i) % 16 != 0; ++i) dst[i] = src[i];
  for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = src[i];
  _mm_sfence();  // streaming stores are weakly ordered: done before the workers are started
#else
  std::copy(src, src + n, dst);
#endif
}

// to[lo, hi) += from[lo, hi)
void add(const float* from, float* to, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) to[i] += from[i];
}

}  // namespace

// Each thread's GEMMs run on that thread alone: OpenBLAS' own workers would compete with ours.
ThreadedModel::ThreadedModel(Model& model, ThreadPool& pool)
    : model_(model),
      pool_(pool),
      prepared_batch_(size_t(pool.size())),
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

int ThreadedModel::chains(int n) const { return std::min(shares(n), pool_.size()); }

bool ThreadedModel::workers_copy_weights(int n) const {
  return shares(n) > 1 && double(n) * flops_per_row_per_param_ >= kMinFlopsPerParamToCopy;
}

void ThreadedModel::reserve(int batch) {
  const int count = shares(batch);
  add_scratch(count);
  const int threads = count > 1 ? pool_.size() : 1;
  for (int t = 0; t < threads; ++t) of_thread(t).reserve((batch + count - 1) / count);
}

void ThreadedModel::add_scratch(int count) {
  if (count > 1 && pool_.size() > 1 && copies_.empty()) {
    workers_params_.resize(size_t(model_.num_params()));
    while (int(copies_.size()) + 1 < pool_.size()) copies_.push_back(Model::reading_params(model_, workers_params_.data()));
  }
  while (int(share_grads_.size()) + 1 < count) share_grads_.emplace_back(size_t(model_.num_params()));
  if (int(stats_.size()) < count) stats_.resize(size_t(count));
}

void ThreadedModel::for_each_share(int n, const Share& share) {
  const int count = shares(n);
  add_scratch(count);
  ++batches_;
  auto first = [&](int s) { return int(int64_t(n) * s / count); };  // n * s passes 2^31 at large batches
  const int chain_count = chains(n);
  auto chain_job = [&](int chain, int t) {
    for (int s = chain; s < count; s += chain_count) {
      const bool prepared = prepared_batch_[size_t(t)] == batches_;
      prepared_batch_[size_t(t)] = batches_;
      share(of_thread(t), s, chain, first(s), first(s + 1) - first(s), prepared);
    }
  };
  if (choice_.alone(pool_.crowded(), seconds_now())) {
    for (int chain = 0; chain < chain_count; ++chain) chain_job(chain, 0);
  } else {
    if (count > 1 && !copies_.empty()) {
      const bool copy = workers_copy_weights(n);
      if (copy != workers_read_copy_) {
        for (Model& c : copies_) c.read_params(copy ? workers_params_.data() : model_.params().data());
        workers_read_copy_ = copy;
      }
      if (copy) copy_streaming(model_.params().data(), workers_params_.data(), model_.num_params());
    }
    pool_.run_on_threads(chain_count, chain_job);
  }
}

bool CrowdedChoice::alone(bool crowded, double now) {
  if (last_probed_) seconds_[last_alone_] += now - last_start_;
  last_start_ = now;
  if (!crowded) {
    *this = CrowdedChoice();
    return false;
  }
  // A probe's three stretches of kProbeBatches: alone, on all threads, alone.
  constexpr int stretches = 3, all_threads = 1;
  if (position_ == exploit_ + stretches * kProbeBatches) {
    const bool alone_faster = seconds_[1] / (stretches - 1) < seconds_[0];  // the mean batch
    // The first probe's exploit_ is 0: kept or not, it clamps up to kExploitBatches.
    exploit_ = std::clamp(alone_faster == chosen_alone_ ? 2 * exploit_ : 0, kExploitBatches, kMostExploitBatches);
    chosen_alone_ = alone_faster;
    position_ = 0, seconds_[0] = seconds_[1] = 0;
  }
  const int probe = position_++ - exploit_;  // [0, stretches kProbeBatches) while probing
  last_probed_ = probe >= 0;
  last_alone_ = last_probed_ ? probe / kProbeBatches != all_threads : chosen_alone_;
  return last_alone_;
}

LossStats ThreadedModel::forward_backward(const float* x, const int32_t* y, int n, const Context& ctx,
                                          const Model::GradientsReady& ready) {
  const int count = shares(n);
  if (count == 1) {
    Context whole = ctx;
    whole.pool = &pool_;
    return model_.forward_backward(x, y, n, whole, ready);
  }
  struct OwnGrads {  // thread 0's scratch is the model: its layers point at grads() again after
    Model& m;
    ~OwnGrads() { m.bind_grads(m.grads().data()); }
  } own_grads{model_};
  for_each_share(n, [&](Model& scratch, int s, int chain, int first, int rows, bool prepared) {
    Context share = ctx;
    share.first_row = first, share.batch_rows = n, share.prepared = prepared;
    share.pool = nullptr;  // a share runs on its thread alone: the pool is busy with the shares
    scratch.bind_grads(grads_of_share(s));
    stats_[size_t(s)] = scratch.forward_backward(x + int64_t(first) * kImagePixels, y + first, rows, share);
    if (s != chain) add(grads_of_share(s), grads_of_share(chain), 0, model_.num_params());
  });
  // Share 0's buffer gets the sum of the chains', each element added in chain order.
  float* sum = model_.grads().data();
  const int chain_count = chains(n);
  pool_.run_ranges(model_.num_params(), [&](int64_t lo, int64_t hi) {
    for (int chain = 1; chain < chain_count; ++chain) add(grads_of_share(chain), sum, lo, hi);
  });
  if (ready) ready(0);
  LossStats total;
  for (int s = 0; s < count; ++s) total.loss_sum += stats_[size_t(s)].loss_sum, total.correct += stats_[size_t(s)].correct;
  return total;
}

void ThreadedModel::forward(const float* x, int n, const ShareLogits& share) {
  for_each_share(n, [&](Model& scratch, int s, int, int first, int rows, bool prepared) {
    Context ctx;
    ctx.prepared = prepared;
    share(s, scratch.forward(x + int64_t(first) * kImagePixels, rows, ctx), first, rows);
  });
}

}  // namespace pitrain
