#include <algorithm>
#include <chrono>
#include <fstream>
#include <system_error>

#include "pitrain/comm.h"
#include "pitrain/error.h"
#include "pitrain/thread_pool.h"

namespace pitrain {
namespace {

// Polls `done` for up to `micros`; true if it came true meanwhile.
template <class Done>
bool spin_until(int micros, Done done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  while (!done())
    if (std::chrono::steady_clock::now() > until) return false;
  return true;
}

constexpr const char* kSchedstat = "/proc/thread-self/schedstat";

// This thread's nanoseconds on a core and waiting for one (ready to run), from the kernel's
// scheduler statistics; false where the kernel keeps none (no file: a kernel without schedstats).
bool read_schedstat(int64_t& run, int64_t& wait) {
  return bool(std::ifstream(kSchedstat) >> run >> wait);
}

// Whether the calling thread, over the last window, waited for a core more than an eighth of the
// time it ran (read_schedstat). update() returns false where the file cannot be read: then
// nothing can be measured. A window whose run time did not advance (the kernel counts it at ticks
// and switches) tells nothing and changes nothing. The first read, at the end of the thread's
// first job, only sets the counts: from the thread's start they would count the process's start-up,
// when a thread waits for a core far longer than it runs, even on free cores. The first window
// after it is short (the pool counts the cores free until then), the later ones long enough to
// smooth them.
class CrowdingMeter {
 public:
  bool update(std::atomic<bool>& crowded) {
    const auto now = std::chrono::steady_clock::now();
    if (reads_ > 0 && now - last_ < (reads_ == 1 ? kFirstWindow : kWindow)) return true;
    last_ = now;
    int64_t run = 0, wait = 0;
    if (!read_schedstat(run, wait)) return false;
    if (reads_ > 0 && run <= run_) return true;
    if (reads_ > 0) crowded = 8 * (wait - wait_) > run - run_;
    reads_ = std::min(reads_ + 1, 2), run_ = run, wait_ = wait;
    return true;
  }

 private:
  static constexpr auto kFirstWindow = std::chrono::milliseconds(5),
                        kWindow = std::chrono::milliseconds(50);
  std::chrono::steady_clock::time_point last_;
  int reads_ = 0;  // 0, 1, or 2 for more
  int64_t run_ = 0, wait_ = 0;
};

}  // namespace

ThreadPool::ThreadPool(int threads, Cores cores) : home_taken_(size_t(std::max(threads, 1))) {
  int64_t run = 0, wait = 0;
  measurable_ = read_schedstat(run, wait);
  try {
    for (int t = 1; t < threads; ++t) workers_.emplace_back(&ThreadPool::work, this, t);
  } catch (const std::system_error& e) {  // a limit on processes (ulimit -u, a container's pids)
    stop_workers();
    throw Error("--threads " + std::to_string(threads) + ": cannot start thread " +
                std::to_string(workers_.size() + 1) + " (" + e.what() + "); use fewer threads");
  }
  set_cores(cores);  // once the workers are counted
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& w : workers_) w.join();
}

// Thread t's own item first, then the items beyond the threads' own, then any worker's own
// item that its thread has not taken yet (the OS holds it back). Item 0 runs on the calling
// thread, which always comes for it: a job may keep its writes there (train_step's update).
void ThreadPool::take_items(int self) {
  const int homes = std::min(items_, size());
  auto take = [&](int i) {
    try {
      (*job_)(i, self);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      next_ = items_;  // the job failed: leave the rest
      for (int t = 0; t < homes; ++t) home_taken_[size_t(t)] = true;
    }
  };
  auto claim = [&](int t) {
    return !home_taken_[size_t(t)].load() && !home_taken_[size_t(t)].exchange(true);
  };
  if (self < homes && claim(self)) take(self);
  for (int i; (i = next_.fetch_add(1)) < items_;) take(i);
  for (int t = 1; t < homes; ++t)
    if (claim(t)) take(t);
}

// Crowded: a polling worker would take a core that the others need (bench/compare_builds.sh beside
// a busy neighbour; bench/RESULTS.md, "What the threads' mechanisms buy").
int ThreadPool::poll_micros() const { return crowded_ ? 0 : kFreePollMicros; }

// Each worker waits for a new job (polling, then asleep on start_); it joins a job of items only
// while the job is open, a posted one whenever it comes. One of them measures whether the cores
// are crowded.
void ThreadPool::work(int self) {
  const bool measures_crowding = self == 1;
  uint64_t seen = 0;
  CrowdingMeter meter;
  for (;;) {
    spin_until(poll_micros(), [&] { return generation_ != seen || stopping_; });
    const std::function<void(int)>* posted = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (posted_) {
        posted = posted_, ++in_posted_;
      } else if (open_) {
        ++active_;
      } else {
        continue;
      }
    }
    if (posted) {
      (*posted)(self);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--in_posted_ == 0) posted_done_.notify_all();
    } else {
      take_items(self);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--active_ == 0) done_.notify_one();
    }
    // After the job: its caller does not wait for it. Where nothing can be measured, all threads
    // work, always.
    if (measures_crowding && measured_ && !meter.update(crowded_))
      measurable_ = false, set_cores(Cores::measured);
  }
}

void ThreadPool::post(const std::function<void(int)>& job) {
  if (workers_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    posted_ = &job, open_ = false;
    ++generation_;
  }
  start_.notify_all();
}

void ThreadPool::set_cores(Cores cores) {
  measured_ = cores == Cores::measured && measurable_ && size() > 1;
  crowded_ = cores == Cores::crowded;
}

std::string ThreadPool::cores_text() const {
  if (size() == 1) return "one thread";
  if (!measurable_)
    return std::string("not measured (no ") + kSchedstat + "): all threads always work";
  return measured_  ? "measured (backups while other processes take the cores)"
         : crowded_ ? "set crowded"
                    : "set free";
}

void ThreadPool::withdraw_posted() {
  std::unique_lock<std::mutex> lock(mutex_);
  posted_ = nullptr;
  posted_done_.wait(lock, [&] { return in_posted_ == 0; });
}

void ThreadPool::run(int items, const std::function<void(int)>& job) {
  run_on_threads(items, [&](int item, int) { job(item); });
}

void ThreadPool::run_on_threads(int items, const std::function<void(int, int)>& job) {
  if (workers_.empty() || items <= 1) {
    for (int i = 0; i < items; ++i) job(i, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job, posted_ = nullptr, items_ = items, next_ = std::min(items, size()),
    error_ = nullptr, open_ = true;
    for (auto& taken : home_taken_) taken = false;
    ++generation_;
  }
  start_.notify_all();
  take_items(0);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = false;  // every item is taken: late workers stay out
  }
  std::exception_ptr error;
  {
    spin_until(poll_micros(), [&] { return active_ == 0; });
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return active_ == 0; });
    error = error_;
  }
  if (error) std::rethrow_exception(error);
}

int ThreadPool::ranges(int64_t n, int64_t grain) const { return crowded_ ? 1 : parts(n, grain); }

int ThreadPool::parts(int64_t n, int64_t grain) const {
  return int(std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, size()));
}

void ThreadPool::run_ranges(int64_t n, const std::function<void(int64_t, int64_t)>& job,
                            int64_t grain) {
  const int count = ranges(n, grain);
  run(count, [&](int t) { job(n * t / count, n * (t + 1) / count); });
}

int default_threads() {
  return std::max(1, int(std::thread::hardware_concurrency()) / local_ranks());
}

}  // namespace pitrain
