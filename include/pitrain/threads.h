// Parallelism inside a rank. A fixed team of threads that sleep between jobs (no spinning that
// would take a core from MPI or from other processes), and the model's compute split across
// them by batch rows, as Caffe and darknet do on CPUs: each thread runs forward and backward of
// its share with single-threaded GEMMs, and the shares' gradients are summed in thread order,
// so for a given thread count a run's result never depends on timing.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "pitrain/model.h"

namespace pitrain {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // the calling thread is thread 0: threads - 1 are started
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return int(workers_.size()) + 1; }
  // Calls job(t) for t in [0, count), count <= size(), on threads 0..count-1; returns when all
  // are done. An exception on any thread is rethrown here.
  void run(int count, const std::function<void(int)>& job);
  // job(lo, hi) over [0, n) cut into size() contiguous ranges, one a thread.
  void run_ranges(int64_t n, const std::function<void(int64_t lo, int64_t hi)>& job);

 private:
  void work(int t);
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* job_ = nullptr;
  int count_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

// A model's forward and backward over a pool: thread t takes rows [t n / T, (t + 1) n / T) of
// each batch, on its own copy of the layers' scratch and its own gradient buffer (thread 0
// uses the model itself), reading the model's parameters. Batches of fewer rows than
// kMinRowsPerThread x T use fewer threads.
class ThreadedModel {
 public:
  ThreadedModel(Model& model, ThreadPool& pool);
  Model& model() { return model_; }
  ThreadPool& pool() { return pool_; }
  void reserve(int batch);
  // model().grads() = the gradient of the mean loss over the n rows. With one thread, `ready`
  // is called as backward makes each layer's gradients (Model::backward); with more, once at
  // the end with lo = 0.
  LossStats forward_backward(const float* x, const int32_t* y, int n, const Context& ctx,
                             const Model::GradientsReady& ready = nullptr);
  // Inference: share(t, logits, first, rows) for each thread's share of the n rows, called on
  // that thread; logits (rows, classes) of rows [first, first + rows).
  using ShareLogits = std::function<void(int t, const float* logits, int first, int rows)>;
  void forward(const float* x, int n, const ShareLogits& share);
  int shares(int n) const;  // how many threads a batch of n rows uses

 private:
  Model& model_;
  ThreadPool& pool_;
  std::vector<Model> copies_;  // threads 1..T-1: the model's layers, own scratch and gradients
  std::vector<LossStats> stats_;  // of each thread's share of the last batch
  Model& on_thread(int t) { return t == 0 ? model_ : copies_[size_t(t - 1)]; }
};

// Rows a thread needs to pay for its start and the gradient sum (bench/RESULTS.md, threads).
constexpr int kMinRowsPerThread = 4;

// The node's cores shared among the ranks on it (at least 1): --threads 0.
int default_threads();

}  // namespace pitrain
