// Parallelism inside a rank. A fixed team of threads that sleep between jobs (after polling
// 250 us at most, 20 us while other processes wait for the cores), and the model's compute split
// across them by batch rows, as Caffe and darknet do on CPUs: each share of the batch runs
// forward and backward with single-threaded GEMMs, and the shares' gradients are summed in a
// fixed order, so for a given thread count a run's result never depends on timing.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "pitrain/model.h"

namespace pitrain {

// Jobs are lists of items that the calling thread and the woken workers take as they come
// free, each thread its own item first (item t is thread t's, the caller's 0, which only it
// runs: a job cut the same way every step finds its data in the same core's cache). A worker the OS
// holds back (a busy core) finds the items gone, its own too, and is not waited for, so a job is
// never much slower than the calling thread doing it alone. Between jobs a thread polls, then
// sleeps: an idle pool takes no core from MPI or from other processes. It polls kFreePollMicros
// while the cores are free, so that a step's jobs, which come back to back, find the workers awake
// (a futex wake-up is slow on a VM), and kSpinMicros while they are crowded (a worker waits
// for a core over an eighth of the time it runs: another process needs them); then element-wise
// jobs stay on the calling thread, as a woken worker that the OS holds back inside a range would
// keep the job waiting. Whether the pool's cores count as crowded: as worker 1 measures them, or
// (tests) as set.
enum class Cores { measured, free, crowded };

class ThreadPool {
 public:
  // The calling thread is one: threads - 1 are started.
  explicit ThreadPool(int threads, Cores cores = Cores::measured);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return int(workers_.size()) + 1; }
  // Calls job(i) once for each i in [0, items), on whichever threads take them; returns when
  // all are done. An exception in any item is rethrown here.
  void run(int items, const std::function<void(int item)>& job);
  // The same, telling each item the index of the thread that runs it (0 the caller, 1.. the
  // workers): a thread runs one item at a time, so items may use scratch of their thread's.
  void run_on_threads(int items, const std::function<void(int item, int thread)>& job);
  // Wakes the workers to call job(worker) once each and returns at once: the calling thread
  // does not wait for them, and a worker still in it when the next job comes joins that one late
  // or not at all. `job` must not throw, and must stay alive until withdraw_posted().
  void post(const std::function<void(int worker)>& job);
  // No worker starts the posted job from now on; returns once none is in it (whoever posted it:
  // the pool has one posted job at a time).
  void withdraw_posted();
  // job(lo, hi) over [0, n) cut into ranges(n, grain) contiguous ranges.
  void run_ranges(int64_t n, const std::function<void(int64_t lo, int64_t hi)>& job,
                  int64_t grain = kRangeGrain);
  // Up to size() ranges of at least `grain` (element-wise work: below that a range costs less
  // than handing it to another thread), one while the cores are crowded.
  int ranges(int64_t n, int64_t grain = kRangeGrain) const;
  // Up to size() parts of at least `grain`, whether or not the cores are crowded: for work whose
  // result depends on the cut (partial sums), which must not depend on timing.
  int parts(int64_t n, int64_t grain = kRangeGrain) const;
  bool crowded() const { return crowded_; }
  void set_cores(Cores cores);  // Cores::measured: as the next measurement says

  static constexpr int64_t kRangeGrain = 8192;

 private:
  void work(int self);  // worker `self` (1..): worker 1 measures whether the cores are crowded
  void stop_workers();  // tells the workers to stop and joins them
  int poll_micros() const;
  void take_items(int self);  // runs items until none are left; self: the calling thread's index
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_, posted_done_;
  const std::function<void(int, int)>* job_ = nullptr;
  const std::function<void(int)>* posted_ = nullptr;  // the job of this generation, if posted
  int in_posted_ = 0;                                 // workers inside a posted job
  int items_ = 0;
  std::atomic<int> next_{0};                   // the next item to take beyond the threads' own
  std::vector<std::atomic<bool>> home_taken_;  // (threads) whether item t was taken
  std::atomic<int> active_{0};                 // workers inside the current job
  bool open_ = false;                          // workers may still join the current job
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
  // As worker 1 last measured; free before it has (5 ms after its first job) and without workers.
  std::atomic<bool> crowded_{false};
  std::atomic<bool> measured_{true};  // Cores::measured
  std::exception_ptr error_;
};

// A model's forward and backward over a pool. A batch of n rows is cut into S shares, share s being
// rows [s n / S, (s + 1) n / S), each computed into its own gradient buffer (share 0's is the
// model's) on the scratch of the thread that takes it (thread 0's is the model itself), reading the
// model's parameters (the workers: a copy of them where workers_copy_weights) and prepared weights
// of its own, which the thread's first share of the batch makes (made once by parts on all threads,
// they would be a job of their own, each thread writing lines that the other's cache holds). The
// shares run in L chains (L = the threads, at most S), share s in chain s % L, a chain's shares one
// after the other on the thread that takes the chain (thread t its own chain t first), each later
// share's gradients added into the chain's first share's buffer as soon as it is done, in that
// core's cache; then the chains' sums are added in chain order. The result depends on S and L,
// never on which thread ran what. Each thread's share buffers stay in its own core: threads that
// took shares as they came free and summed them all by ranges would move a share's buffer from core
// to core every step. Where the calling thread updates the weights alone (workers_copy_weights), it
// also adds the chains' sums alone, and every chain but the first ends by writing its sum to a
// buffer past its thread's cache (chain_sums_): threads that add the chains by ranges each write
// lines that the other's cache holds, and the worker's weight gradients (Winograd's dU to dW,
// Dense's dW) then take several times as long as the calling thread's. A worker that the OS holds
// back inside its chain keeps the batch waiting for the chain's rest too. S is twice the threads
// (on 2 threads, `cnn` at batch 32 runs faster in four shares of 8 rows than in two of 16;
// bench/compute.sh), or more where a share's activations would pass kShareBytes: shares that stay
// in cache pay even on one thread, as each thread's scratch is reused share after share. A share
// costs work per parameter whatever its rows (its weight gradients, their sum), so a batch is cut
// only into shares of at least kMinFlopsPerParam training FLOPs per parameter: `cnn` splits from
// batch 2, `mlp` (few FLOPs per weight) only at large batches.
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
// summed in the chains' order, so a run's result still depends only on the thread count. The
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
  int chains(int n) const;  // how many chains they run in: share s in chain s % chains(n)
  // Whether the workers compute a batch of n rows from a copy of the weights (workers_params_):
  // where it is cut into shares and the batch brings at least kMinFlopsPerParamToCopy training
  // FLOPs a weight, so that copying and updating every weight on one thread is a small part of
  // a step.
  bool workers_copy_weights(int n) const;
  // The pool to update the weights on after a batch of n rows (Optimizer::step): none (the
  // calling thread alone) where the workers read a copy of the weights, as only the calling
  // thread reads the weights themselves; else the pool, by ranges, as all threads read the
  // weights anyway (and a batch that is not cut splits Dense's kernel rows across the threads
  // likewise, so that each range is in the cache of the core that updates it).
  ThreadPool* pool_for_update(int n) const { return workers_copy_weights(n) ? nullptr : &pool_; }
  // Shares of crowded batches so far that a worker computed and the batch used.
  uint64_t worker_shares() const { return worker_shares_; }
  // Tests: called on a worker each time it has claimed a share of a crowded batch, before it
  // computes it (a worker the OS holds back inside a share).
  std::function<void()> after_worker_claim;

 private:
  // What the workers read of a crowded batch: the calling thread's copies, theirs alone.
  struct Slot {
    std::vector<float> params, x;  // (num_params), (n, 28, 28, 1)
    std::vector<int32_t> y;        // (n)
    int n = 0, count = 0;          // rows, shares
    uint64_t batch = 0;
    Context ctx;
  };
  Model& model_;
  ThreadPool& pool_;
  // Runs share(scratch, s, chain, first, rows, prepared) for the shares of n rows on the pool's
  // threads, chain by chain (a chain's shares in order, on one thread; chain: its first share),
  // each on the scratch of the thread that runs it; prepared: whether an earlier share of the
  // batch on that thread made the scratch's prepared weights.
  using Share =
      std::function<void(Model& scratch, int s, int chain, int first, int rows, bool prepared)>;
  void for_each_share(int n, const Share& share);
  void add_scratch(int count);  // the threads' scratch, gradient buffers for `count` shares
  // Share s of `count` of n rows: its first row (in 64 bits: n s passes 2^31 at large batches).
  static int first_row(int n, int count, int s) { return int(int64_t(n) * s / count); }
  // Gradients of share s on `scratch`, into where it is bound, from the batch's rows x, y
  // and context (first_row, batch_rows and prepared set here).
  LossStats share_forward_backward(Model& scratch, const float* x, const int32_t* y, int n,
                                   int count, int s, const Context& ctx, bool prepared);
  // dst = a + b (n floats), or a where b is null, for another thread to read: written past the
  // writer's cache.
  static void write_for_another_core(const float* a, const float* b, float* dst, int64_t n);
  LossStats sum_stats(int count) const;       // of the last batch's `count` shares
  void add_share_to_chain(int s, int chain);  // the chain's buffer += share s's
  void add_chain_sums(int n);  // chain_sums_ for a batch of n rows, where it needs them
  // chain_sums_ of chain (1..) = its buffer + its last share s's.
  void write_chain_sum(int s, int chain);
  // Share 0's buffer += the other chains' sums, in chain order: each in its first share's
  // buffer, or written out to chain_sums_.
  enum class ChainSums { in_chain_buffers, written_out };
  void add_chains(int chain_count, ChainSums sums, int64_t lo, int64_t hi);
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
  std::vector<Model> copies_;  // threads 1..: the model's layers with their own scratch
  // What threads 1.. read as the model's parameters where workers_copy_weights: a copy that the
  // calling thread writes before each batch that runs on them, so that it alone reads the
  // weights and can update them (pool_for_update) without taking their lines back from the
  // workers' cores. Threads that both read the weights and update half each move lines from core
  // to core; on a VM whose two vCPUs are at times far apart, that makes the update the step's
  // largest cost.
  std::vector<float> workers_params_;
  std::vector<std::vector<float>> share_grads_;  // shares 1..: (num_params)
  // Chains 1..: (num_params) each worker chain's sum, written past the worker's cache
  // (write_for_another_core) where the calling thread sums the chains alone.
  std::vector<std::vector<float>> chain_sums_;
  std::vector<LossStats> stats_;  // of each share of the last batch
  uint64_t batches_ = 0;          // batches so far
  // (threads) the batch each thread's prepared weights are of.
  std::vector<uint64_t> prepared_batch_;
  double flops_per_row_per_param_;  // training FLOPs (3x forward) of one row, per parameter
  double bytes_per_row_;            // activations of one row (Model::activation_floats)
  Model& of_thread(int t) { return t == 0 ? model_ : copies_[size_t(t - 1)]; }
  float* grads_of_share(int s) {
    return s == 0 ? model_.grads().data() : share_grads_[size_t(s - 1)].data();
  }
};

// Tuned with bench/compute.sh (bench/RESULTS.md, Compute): mlp at batch 32 (190 FLOPs per
// parameter) is slower on 2 threads than on 1, at batch 128 (770) faster; cnn gains from batch 8.
constexpr double kMinFlopsPerParam = 300;
// Tuned with bench/compute.sh (bench/RESULTS.md, Compute): with the workers reading a copy of the
// weights, `cnn` at batch 32 trains faster on 2 threads than without it, and `mlp` at batch 128
// (770 FLOPs per parameter) slower; a threshold between the two.
constexpr double kMinFlopsPerParamToCopy = 3000;
// Tuned with bench/compute.sh (bench/RESULTS.md, Compute): cnn on 1 thread runs fastest in
// shares of 8 rows (5 MB of activations), faster than in whole batches of 32 or 128.
constexpr double kShareBytes = 6 << 20;
// Tuned with bench/compute.sh's busy neighbour (bench/RESULTS.md, Compute): beside another busy
// process, cnn batch 32 on 2 threads runs faster polling 20 us than 100 us (a polling worker
// takes a core that the others need).
constexpr int kSpinMicros = 20;
// Tuned with bench/compute.sh (bench/RESULTS.md, Compute): on free cores a sleeping worker wakes
// later than the gaps between a step's jobs last, so cnn batch 32 on 2 threads runs faster
// polling 250 us and splitting the small jobs; beside a busy neighbour it runs as fast.
constexpr int kFreePollMicros = 250;

// The node's cores shared among the ranks on it (at least 1): --threads 0.
int default_threads();

}  // namespace pitrain
