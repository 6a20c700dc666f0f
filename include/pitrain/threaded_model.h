// A model's compute split across a thread pool by batch rows, as Caffe and darknet do on CPUs:
// each share of the batch runs forward and backward with single-threaded GEMMs, and the shares'
// gradients are summed in a fixed order, so for a given thread count a run's result never
// depends on timing.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "pitrain/model.h"
#include "pitrain/thread_pool.h"

namespace pitrain {

// Tuned with bench/compute.sh (bench/RESULTS.md, Compute): mlp at batch 32 (190 FLOPs per
// parameter) is slower on 2 threads than on 1, at batch 128 (770) faster; cnn gains from batch 8.
constexpr double kMinFlopsPerParam = 300;
// Tuned with bench/compute.sh (bench/RESULTS.md, Compute): cnn on 1 thread runs fastest in
// shares of 8 rows (5 MB of activations), faster than in whole batches of 32 or 128.
constexpr double kShareBytes = 6 << 20;
// A model's forward and backward over a pool. A batch of n rows is cut into S shares, share s being
// rows [s n / S, (s + 1) n / S), each computed into its own gradient buffer (share 0's is the
// model's) on the scratch of the thread that takes it (thread 0's is the model itself), reading the
// model's parameters and prepared weights of its own, which the thread's first share of the batch
// makes (made once by parts on all threads, they would be a job of their own, each thread writing
// lines that the other's cache holds). The threads take the shares as they come free (thread t
// share t first); then the shares' gradients are added in share order, by ranges on all threads.
// The result depends on S, never on which thread ran what. S is twice
// the threads (on 2 threads, `cnn` at batch 32 runs faster in four shares of 8 rows than in two of
// 16; bench/compute.sh), or more where a share's activations would pass kShareBytes: shares that
// stay in cache pay even on one thread, as each thread's scratch is reused share after share. A
// share costs work per parameter whatever its rows (its weight gradients, their sum), so a batch is
// cut only into shares of at least kMinFlopsPerParam training FLOPs per parameter: `cnn` splits
// from batch 2, `mlp` (few FLOPs per weight) only at large batches.
//
// While the cores are crowded (ThreadPool::crowded), training runs each batch's shares with
// backups, as MapReduce does for its stragglers: the calling thread computes the shares from the
// first, the workers from the last, each claiming a share before it starts it; where the calling
// thread comes to a share that a worker claimed and has not finished, it computes that share
// itself rather than wait for it, and uses the worker's only where it is done by then. Beside a
// busy process the OS takes a worker off its core many times a second, for milliseconds each
// time, so any share it holds may keep a batch waiting: a batch that waits for the workers makes
// two threads train slower than one (bench/compute.sh's busy neighbour; bench/RESULTS.md,
// Compute). A share's result is the same bits whichever thread computes it, and the shares are
// summed in share order, so a run's result still depends only on the thread count. The
// workers are not waited for: they read the batch, the weights and the context from a slot that
// the calling thread copies them to, one of one more slots than there are workers, and never
// writes a slot that a worker still reads.
class ThreadedModel {
 public:
  ThreadedModel(Model& model, ThreadPool& pool);
  ~ThreadedModel();  // waits for workers still in a crowded batch
  ThreadedModel(const ThreadedModel&) = delete;
  ThreadedModel& operator=(const ThreadedModel&) = delete;
  Model& model() { return model_; }
  ThreadPool& pool() { return pool_; }
  void reserve(int batch);
  // model().grads() = the gradient of the mean loss over the n rows. With one share, `ready`
  // is called as backward makes each layer's gradients (Model::backward); with more, once at
  // the end with lo = 0.
  LossStats forward_backward(const float* x, const int32_t* y, int n, const Context& ctx,
                             const Model::GradientsReady& ready = nullptr);
  // Inference: share(s, logits, first, rows) for each share s of the n rows, on the thread that
  // computed it (while the cores are crowded, all on the calling thread); logits (rows, classes)
  // of rows [first, first + rows).
  using ShareLogits = std::function<void(int s, const float* logits, int first, int rows)>;
  void forward(const float* x, int n, const ShareLogits& share);
  int shares(int n) const;  // how many shares a batch of n rows is cut into
  // Shares of crowded batches so far that a worker computed and the batch used.
  uint64_t worker_shares() const { return worker_shares_; }
  // The share of the training batches cut into shares so far that ran on crowded cores (with
  // backups); 0 before any.
  double crowded_share() const {
    return split_batches_ ? double(crowded_batches_) / double(split_batches_) : 0.0;
  }
  // Tests: called on a worker each time it has claimed a share of a crowded batch, before it
  // computes it (a worker the OS holds back inside a share).
  std::function<void()> after_worker_claim;

 private:
  // What the workers read of a crowded batch: the calling thread's copies, theirs alone.
  struct Slot {
    std::vector<float> params, x;  // (num_params), (n, H, W, C): the model's input
    std::vector<int32_t> y;        // (n)
    int n = 0, count = 0;          // rows, shares
    uint64_t batch = 0;
    Context ctx;
  };
  Model& model_;
  ThreadPool& pool_;
  // Runs share(scratch, s, first, rows, prepared) for the shares of n rows on the pool's threads,
  // each on the scratch of the thread that runs it; prepared: whether an earlier share of the
  // batch on that thread made the scratch's prepared weights.
  using Share = std::function<void(Model& scratch, int s, int first, int rows, bool prepared)>;
  void for_each_share(int n, const Share& share);
  void add_scratch(int count);  // the threads' scratch, gradient buffers for `count` shares
  // Share s of `count` of n rows: its first row (in 64 bits: n s passes 2^31 at large batches).
  static int first_row(int n, int count, int s) { return int(int64_t(n) * s / count); }
  // Gradients of share s on `scratch`, into where it is bound, from the batch's rows x, y
  // and context (first_row, batch_rows and prepared set here).
  LossStats share_forward_backward(Model& scratch, const float* x, const int32_t* y, int n,
                                   int count, int s, const Context& ctx, bool prepared);
  // dst = src (n floats), for another thread to read: written past the writer's cache.
  static void copy_for_another_core(const float* src, float* dst, int64_t n);
  LossStats sum_stats(int count) const;  // of the last batch's `count` shares
  // Share 0's buffer += the other shares' gradients, in share order.
  void add_shares(int count, int64_t lo, int64_t hi);
  // The crowded path (backups.cpp): the calling thread's part, a worker's part, their buffers.
  LossStats forward_backward_crowded(const float* x, const int32_t* y, int n, const Context& ctx);
  void worker_backups(int worker);
  void add_backup_scratch(int count);
  struct Backup {              // a worker's result for a share
    std::vector<float> grads;  // (num_params)
    LossStats stats;
  };
  Backup& backup(int worker, int s) { return backups_[size_t((worker - 1) * backup_shares_ + s)]; }
  std::vector<Slot> slots_;  // (threads): one more than the workers
  // The crowded batch whose shares may start: batch << 16 | slot; 0: none.
  std::atomic<uint64_t> open_batch_{0};
  std::unique_ptr<std::atomic<int>[]> reading_;  // (threads) the slot each worker reads, or -1
  // (backup_shares_) the last batch a share was claimed in; and done in by a worker: batch << 16 |
  // worker
  std::unique_ptr<std::atomic<uint64_t>[]> share_claimed_, share_done_;
  int backup_shares_ = 0;
  std::vector<Backup> backups_;  // (workers x backup_shares_)
  // The job posted to the workers for the backup shares.
  const std::function<void(int)> backup_job_{[this](int worker) { worker_backups(worker); }};
  uint64_t worker_shares_ = 0;
  uint64_t split_batches_ = 0, crowded_batches_ = 0;  // training batches cut into shares
  std::vector<Model> copies_;  // threads 1..: the model's layers with their own scratch
  std::vector<std::vector<float>> share_grads_;  // shares 1..: (num_params)
  std::vector<LossStats> stats_;                 // of each share of the last batch
  uint64_t batches_ = 0;                         // batches so far
  // (threads) the batch each thread's prepared weights are of.
  std::vector<uint64_t> prepared_batch_;
  double flops_per_row_per_param_;  // training FLOPs (3x forward) of one row, per parameter
  double bytes_per_row_;            // activations of one row (Model::activation_floats)
  Model& of_thread(int t) { return t == 0 ? model_ : copies_[size_t(t - 1)]; }
  float* grads_of_share(int s) {
    return s == 0 ? model_.grads().data() : share_grads_[size_t(s - 1)].data();
  }
};

}  // namespace pitrain
