#include <algorithm>

#include "pitrain/comm.h"
#include "pitrain/threads.h"

namespace pitrain {

ThreadPool::ThreadPool(int threads) {
  for (int t = 1; t < threads; ++t) workers_.emplace_back(&ThreadPool::work, this, t);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& w : workers_) w.join();
}

// Each worker sleeps on start_ until a job with a new generation needs it.
void ThreadPool::work(int t) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (t >= count_) continue;
      job = job_;
    }
    std::exception_ptr error;
    try {
      (*job)(t);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (error && !error_) error_ = error;
    if (--pending_ == 0) done_.notify_one();
  }
}

void ThreadPool::run(int count, const std::function<void(int)>& job) {
  if (count > 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job, count_ = count, pending_ = count - 1, error_ = nullptr;
    ++generation_;
  }
  if (count > 1) start_.notify_all();
  std::exception_ptr error;
  try {
    job(0);
  } catch (...) {
    error = std::current_exception();
  }
  if (count > 1) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    if (!error) error = error_;
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::run_ranges(int64_t n, const std::function<void(int64_t, int64_t)>& job) {
  const int count = int(std::min<int64_t>(size(), std::max<int64_t>(n, 1)));
  run(count, [&](int t) { job(n * t / count, n * (t + 1) / count); });
}

int default_threads() { return std::max(1, int(std::thread::hardware_concurrency()) / local_ranks()); }

}  // namespace pitrain
