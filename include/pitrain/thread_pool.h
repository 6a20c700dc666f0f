// Parallelism inside a rank: a fixed team of threads that sleep between jobs (after polling
// kFreePollMicros at most while the cores are free). threaded_model.h splits a model's compute
// across them.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pitrain {

// On free cores a sleeping worker wakes later than the gaps between a step's jobs last: polling
// pays (bench/compare_builds.sh, `cnn` at batch 32 and `mlp` at 128 on 2 threads; bench/RESULTS.md,
// "What the threads' mechanisms buy").
constexpr int kFreePollMicros = 250;

// Jobs are lists of items that the calling thread and the woken workers take as they come
// free, each thread its own item first (item t is thread t's, the caller's 0, which only it
// runs: a job cut the same way every step finds its data in the same core's cache). A worker the OS
// holds back (a busy core) finds the items gone, its own too, and is not waited for, so a job is
// never much slower than the calling thread doing it alone. Between jobs a thread polls, then
// sleeps: an idle pool takes no core from MPI or from other processes. It polls kFreePollMicros
// while the cores are free, so that a step's jobs, which come back to back, find the workers awake
// (a futex wake-up is slow on a VM), and not at all while they are crowded (a worker waits for a
// core over an eighth of the time it runs: another process needs them); then element-wise
// jobs stay on the calling thread, as a woken worker that the OS holds back inside a range would
// keep the job waiting. Whether the pool's cores count as crowded: as worker 1 measures them (free
// where the kernel keeps no scheduler statistics), or (tests) as set.
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
  // Cores::measured: free, then as the measurements say; free where nothing can be measured.
  void set_cores(Cores cores);
  // How the pool decides, for the banner and --json: "measured (...)", "not measured (...)", ...
  std::string cores_text() const;

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
  // As worker 1 last measured; free before it has (5 ms after its first job), without workers,
  // and where the kernel keeps no scheduler statistics.
  std::atomic<bool> crowded_{false};
  std::atomic<bool> measured_{false};    // Cores::measured, and it can be measured
  std::atomic<bool> measurable_{false};  // the kernel keeps scheduler statistics
  std::exception_ptr error_;
};

// The node's cores shared among the ranks on it (at least 1): --threads 0.
int default_threads();

}  // namespace pitrain
