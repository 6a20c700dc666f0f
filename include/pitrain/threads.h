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
#include <mutex>
#include <thread>
#include <vector>

#include "pitrain/model.h"

namespace pitrain {

// Jobs are lists of items that the calling thread and the woken workers take as they come
// free, each thread its own item first (item t is thread t's, the caller's 0, which only it
// runs: a job cut the same way every step finds its data in the same core's cache). A worker the OS holds back (a busy
// core) finds the items gone, its own too, and is not waited for, so a job is never much slower
// than the calling thread doing it alone. Between jobs a thread
// polls, then sleeps: an idle pool takes no core from MPI or from other processes. It polls
// kFreePollMicros while the cores are free, so that a step's jobs, which come back to back,
// find the workers awake (a futex wake-up costs ~100 us on a VM), and kSpinMicros while they
// are crowded (a worker waits for a core over an eighth of the time it runs: another process
// needs them); then element-wise jobs stay on the calling thread, as a woken worker that the
// OS holds back inside a range would keep the job waiting.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // the calling thread is one: threads - 1 are started
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
  // job(lo, hi) over [0, n) cut into ranges(n, grain) contiguous ranges.
  void run_ranges(int64_t n, const std::function<void(int64_t lo, int64_t hi)>& job, int64_t grain = kRangeGrain);
  // Up to size() ranges of at least `grain` (element-wise work: below that a range costs less
  // than handing it to another thread), one while the cores are crowded.
  int ranges(int64_t n, int64_t grain = kRangeGrain) const;
  // Up to size() parts of at least `grain`, whether or not the cores are crowded: for work whose
  // result depends on the cut (partial sums), which must not depend on timing.
  int parts(int64_t n, int64_t grain = kRangeGrain) const;
  bool crowded() const { return crowded_; }

  static constexpr int64_t kRangeGrain = 8192;

 private:
  void work(int self);  // worker `self` (1..): worker 1 measures whether the cores are crowded
  void stop_workers();  // tells the workers to stop and joins them
  int poll_micros() const;
  void take_items(int self);  // runs items until none are left; self: the calling thread's index
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int, int)>* job_ = nullptr;
  int items_ = 0;
  std::atomic<int> next_{0};    // the next item to take beyond the threads' own
  std::vector<std::atomic<bool>> home_taken_;  // (threads) whether item t was taken
  std::atomic<int> active_{0};  // workers inside the current job
  bool open_ = false;           // workers may still join the current job
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
  // As worker 1 last measured; free before it has (5 ms after its first job) and without workers.
  std::atomic<bool> crowded_{false};
  std::exception_ptr error_;
};

// While the cores are crowded, whether a batch's shares run on all threads or on the calling
// thread alone, chosen by timing both ways. Beside a busy process, a worker gains where it gets
// a core of its own through its shares, and costs time where it takes turns with the calling
// thread; which of the two happens moves with the OS's placement (bench/RESULTS.md, fortieth
// pass). A probe runs kProbeBatches batches alone, as many on all threads, and as many alone
// again (drift cancels out), each batch timed from its start to the next one's, and compares the
// mean batch: where alone is faster, as it mostly is beside a process that never sleeps, the
// probe's slow batches are half as many as with two stretches on all threads (forty-seventh
// pass). The first probe starts as soon as the cores are found crowded. After a probe, the
// batches run the way it chose until the next probe: kExploitBatches of them after the first
// probe or one that changed the choice, twice as many as the last time after one that kept it,
// up to kMostExploitBatches. So a placement that holds is probed less and less (forty-fifth
// pass: 80 of a 750-batch run's batches on all threads where alone was faster, not 272; with
// one stretch on all threads a probe, 48). While
// the shares run alone, the workers run nothing and the pool cannot see the cores free up: a
// neighbour that leaves is noticed at the next probe. Free cores: all threads, and the next
// crowding starts with a probe. Which thread runs a share never changes its result.
class CrowdedChoice {
 public:
  bool alone(bool crowded, double now_seconds);  // for the batch starting now

  static constexpr int kProbeBatches = 16, kExploitBatches = 192, kMostExploitBatches = 1536;

 private:
  int exploit_ = 0;   // batches the way last chosen before the next probe (0 before the first)
  int position_ = 0;  // batches since the last probe ended or the cores were found crowded
  double last_start_ = 0;
  bool last_probed_ = false, last_alone_ = false, chosen_alone_ = false;
  double seconds_[2] = {0, 0};  // the probe's batches on all threads, alone (twice as many)
};

// A model's forward and backward over a pool. A batch of n rows is cut into S shares, share s being
// rows [s n / S, (s + 1) n / S), each computed into its own gradient buffer (share 0's is the
// model's) on the scratch of the thread that takes it (thread 0's is the model itself), reading the
// model's parameters (the workers: a copy of them where workers_copy_weights) and prepared weights
// of its own, which the thread's first share of the batch makes (made once by parts on all threads,
// they were a job of their own, and each thread wrote lines that the other's cache held: 65 us a
// thread on 2 threads against 75 us on one). The shares run in L chains (L = the threads, at most
// S), share s in chain s % L, a chain's shares one after the other on the thread that takes the
// chain (thread t its own chain t first), each later share's gradients added into the chain's first
// share's buffer as soon as it is done, in that core's cache; then the chains' sums are added in
// chain order. The result depends on S and L, never on which thread ran what. Each thread's share
// buffers stay in its own core: where threads took shares as they came free and summed all of them
// by ranges, a share's buffer went from core to core every step (forty-ninth pass). A worker that
// the OS holds back inside its chain keeps the batch waiting for the chain's rest too. S is twice
// the threads (on 2 threads, `cnn` at batch 32 ran faster in four shares of 8 rows than in two of
// 16; forty-eighth pass), or more where a share's activations would pass kShareBytes: shares that
// stay in cache pay even on one thread, as each thread's scratch is reused share after share. A
// share costs work per parameter whatever its rows (its weight gradients, their sum), so a batch is
// cut only into shares of at least kMinFlopsPerParam training FLOPs per parameter: `cnn` splits
// from batch 2, `mlp` (few FLOPs per weight) only at large batches.
class ThreadedModel {
 public:
  ThreadedModel(Model& model, ThreadPool& pool);
  Model& model() { return model_; }
  ThreadPool& pool() { return pool_; }
  void reserve(int batch);
  // model().grads() = the gradient of the mean loss over the n rows. With one share, `ready`
  // is called as backward makes each layer's gradients (Model::backward); with more, once at
  // the end with lo = 0.
  LossStats forward_backward(const float* x, const int32_t* y, int n, const Context& ctx,
                             const Model::GradientsReady& ready = nullptr);
  // Inference: share(s, logits, first, rows) for each share s of the n rows, on the thread that
  // computed it; logits (rows, classes) of rows [first, first + rows).
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

 private:
  Model& model_;
  ThreadPool& pool_;
  CrowdedChoice choice_;
  // Runs share(scratch, s, chain, first, rows, prepared) for the shares of n rows on the pool's
  // threads, chain by chain (a chain's shares in order, on one thread; chain: its first share),
  // each on the scratch of the thread that runs it; prepared: whether an earlier share of the
  // batch on that thread made the scratch's prepared weights.
  using Share = std::function<void(Model& scratch, int s, int chain, int first, int rows, bool prepared)>;
  void for_each_share(int n, const Share& share);
  void add_scratch(int count);    // the threads' scratch, gradient buffers for `count` shares
  std::vector<Model> copies_;     // threads 1..: the model's layers with their own scratch
  // What threads 1.. read as the model's parameters where workers_copy_weights: a copy that the
  // calling thread writes before each batch that runs on them, so that it alone reads the
  // weights and can update them (pool_for_update) without taking their lines back from the
  // workers' cores. Where both threads read the weights and updated half each, on a VM whose
  // two vCPUs were at times far apart, the update took 3.5x as long, its largest cost in those
  // minutes; with the copy, two threads made 20,959 images/s against 19,092 in such minutes
  // (`cnn`, batch 32; bench/results/threads_fortyeighth.md).
  std::vector<float> workers_params_;
  bool workers_read_copy_ = true;  // whether copies_ read workers_params_ (else the model's own)
  std::vector<std::vector<float>> share_grads_;  // shares 1..: (num_params)
  std::vector<LossStats> stats_;  // of each share of the last batch
  uint64_t batches_ = 0;          // batches so far
  std::vector<uint64_t> prepared_batch_;  // (threads) the batch each thread's prepared weights are of
  double flops_per_row_per_param_;  // training FLOPs (3x forward) of one row, per parameter
  double bytes_per_row_;            // activations of one row (Model::activation_floats)
  Model& of_thread(int t) { return t == 0 ? model_ : copies_[size_t(t - 1)]; }
  float* grads_of_share(int s) { return s == 0 ? model_.grads().data() : share_grads_[size_t(s - 1)].data(); }
};

// By measurement (bench/RESULTS.md, threads): mlp at batch 32 (190 FLOPs per parameter) was
// slower on 2 threads than on 1, at batch 128 (770) faster; cnn gains from batch 8 (2,700).
constexpr double kMinFlopsPerParam = 300;
// By measurement (bench/RESULTS.md, forty-eighth pass): with the workers reading a copy of the
// weights, `cnn` at batch 32 (11,000 training FLOPs a weight a batch) trained faster on 2 threads
// than without it, and `mlp` at batch 128 (770) about 10 % slower (compute.sh, against the
// forty-seventh pass's runs); a threshold between the two.
constexpr double kMinFlopsPerParamToCopy = 3000;
// By measurement (bench/RESULTS.md, shares that stay in cache): cnn on 1 thread ran fastest in
// shares of 8 rows (5 MB of activations), 6-12 % faster than whole batches of 32 or 128.
constexpr double kShareBytes = 6 << 20;
// By measurement (bench/RESULTS.md, third pass): with another busy process, cnn batch 32 on 2
// threads ran 5-8 % faster polling 20 us than 100 us (a polling worker takes a core that the
// others need).
constexpr int kSpinMicros = 20;
// By measurement (bench/RESULTS.md, ninth pass): on free cores the gaps between a step's jobs
// are ~50-150 us, and a sleeping worker woke ~100-150 us late; cnn batch 32 on 2 threads ran
// 4-6 % faster polling 250 us and splitting the small jobs (with a busy neighbour: as before).
constexpr int kFreePollMicros = 250;

// The node's cores shared among the ranks on it (at least 1): --threads 0.
int default_threads();

}  // namespace pitrain
