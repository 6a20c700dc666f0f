// Parallelism inside a rank: the pool, a batch split across threads, and results that do not
// depend on timing (bitwise for a thread count, to float rounding across thread counts).
#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "helpers.h"
#include "pitrain/evaluate.h"
#include "pitrain/threaded_model.h"

using namespace pitrain;

namespace {

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  return worst;
}

// Enough FLOPs per weight that every batch here is split; conv2d_1 goes through Winograd.
const char* kSpec =
    "conv2d(8,3,relu) conv2d(8,3,relu) maxpool2d flatten dropout(0.3) dense(classes,softmax)";

// One batch of n synthetic rows (b), with what it points into.
struct SyntheticBatch {
  Split data;
  BatchLoader loader;
  Batch b;
  SyntheticBatch(int n, int classes, uint64_t seed)
      : data(test::synthetic_split(n, classes, seed)), loader(data, n) {
    loader.reset_in_order();
    b = loader.next();
  }
};

// Two models with the same weights, each on a pool of its own: the reference on free cores,
// the other on cores as `cores` says.
struct SideBySide {
  Model reference_model, model;
  ThreadPool reference_pool, pool;
  ThreadedModel reference, threaded;
  SideBySide(const char* spec, int classes, uint64_t seed, int threads, Cores cores)
      : reference_model(spec, classes),
        model(spec, classes),
        reference_pool(threads, Cores::free),
        pool(threads, cores),
        reference(reference_model, reference_pool),
        threaded(model, pool) {
    reference_model.init_params(seed), model.init_params(seed);
  }
};

void sgd_step(Model& m) {  // params -= 0.05 grads
  for (int64_t i = 0; i < m.num_params(); ++i)
    m.params()[size_t(i)] -= 0.05f * m.grads()[size_t(i)];
}

}  // namespace

TEST_CASE("the pool runs each item once, covers ranges once, and passes exceptions on") {
  ThreadPool pool(3);
  for (int round = 0; round < 200; ++round) {  // many rounds: no item missed or repeated
    std::vector<std::atomic<int>> calls(7);
    pool.run(7, [&](int i) { ++calls[size_t(i)]; });
    for (auto& c : calls) REQUIRE(c == 1);
  }
  std::vector<int> covered(100, 0);
  pool.run_ranges(100, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) ++covered[size_t(i)];
  });
  CHECK(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }));
  CHECK_THROWS_AS(pool.run(3,
                           [](int i) {
                             if (i == 2) throw std::runtime_error("item 2");
                           }),
                  std::runtime_error);
  int after = 0;
  // Still works after a failed job.
  pool.run(2, [&](int i) {
    if (i == 1) after = 1;
  });
  CHECK(after == 1);
}

TEST_CASE("the pool tells each item its thread, which runs one item at a time") {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> inside(3);  // items running on each thread now
  std::atomic<int> bad{0}, items{0};
  for (int round = 0; round < 50; ++round)
    pool.run_on_threads(12, [&](int, int t) {
      if (t < 0 || t >= pool.size() || inside[size_t(t)]++ != 0) ++bad;
      std::this_thread::sleep_for(std::chrono::microseconds(50));  // long enough to overlap
      --inside[size_t(t)];
      ++items;
    });
  CHECK(bad == 0);
  CHECK(items == 50 * 12);
}

TEST_CASE("a batch split across threads gives the whole batch's gradient and dropout masks") {
  const int n = 13, classes = 3;
  const Split data = test::synthetic_split(n, classes, 4);
  BatchLoader loader(data, n);
  loader.reset_in_order();
  const Batch b = loader.next();
  Model one(kSpec, classes), three(kSpec, classes);
  one.init_params(1), three.init_params(1);
  ThreadPool pool1(1), pool3(3, Cores::free);  // free: the workers run shares, whatever else runs
  ThreadedModel t1(one, pool1), t3(three, pool3);
  t1.reserve(n), t3.reserve(n);
  REQUIRE(t3.shares(n) == 6);  // twice the threads: shares of 2 and 3 rows
  const Context ctx{true, 99};
  const LossStats a = t1.forward_backward(b.x, b.y, n, ctx),
                  c = t3.forward_backward(b.x, b.y, n, ctx);
  CHECK(c.loss_sum == Approx(a.loss_sum).epsilon(1e-6));
  CHECK(c.correct == a.correct);
  CHECK(max_abs_diff(one.grads(), three.grads()) < 1e-6);  // a wrong share or mask is off by ~1e-2
  // New weights, set outside any optimizer step: the workers compute with them too (several
  // times, as a batch whose shares all ran on the calling thread would not tell).
  for (uint64_t seed = 2; seed < 6; ++seed) {
    one.init_params(seed), three.init_params(seed);
    t3.forward_backward(b.x, b.y, n, ctx), t1.forward_backward(b.x, b.y, n, ctx);
    CHECK(max_abs_diff(one.grads(), three.grads()) < 1e-6);
  }
  // Afterwards one row (one share, on the model itself) writes the model's own gradients again,
  // not the buffer of the last share that thread 0 computed.
  t1.forward_backward(b.x, b.y, 1, ctx), t3.forward_backward(b.x, b.y, 1, ctx);
  CHECK(max_abs_diff(one.grads(), three.grads()) < 1e-6);
  CHECK(t3.shares(4) == 4);  // never more shares than rows (an evaluation's short last batch)
  CHECK(t3.shares(1) == 1);
  Model mlp("mlp", classes);  // few FLOPs per weight: a small batch stays on one thread
  ThreadedModel mlp3(mlp, pool3);
  CHECK(mlp3.shares(32) == 1);
  CHECK(mlp3.shares(1024) == 6);
}

TEST_CASE("new weights reach the workers, across batch sizes") {
  const int classes = 3;
  const Split data = test::synthetic_split(1024, classes, 5);
  BatchLoader loader(data, 1024);
  loader.reset_in_order();
  const Batch b = loader.next();
  Model one("mlp", classes), three("mlp", classes);
  ThreadPool pool1(1), pool3(3, Cores::free);  // free: the workers run shares, whatever else runs
  ThreadedModel t1(one, pool1), t3(three, pool3);
  t1.reserve(1024), t3.reserve(1024);
  REQUIRE(t3.shares(128) > 1);
  const Context ctx{true, 7};
  auto logits = [&](ThreadedModel& t, int n) {  // evaluation's path: forward only
    std::vector<float> out(size_t(n) * classes);
    t.forward(b.x, n, [&](int, const float* l, int first, int rows) {
      std::copy(l, l + int64_t(rows) * classes, out.begin() + int64_t(first) * classes);
    });
    return out;
  };
  // Each size several times, as a batch whose shares all ran on the calling thread would not tell.
  uint64_t seed = 10;
  for (int n : {128, 128, 128, 1024, 1024, 1024, 128, 128, 128, 256, 1024}) {
    one.init_params(seed), three.init_params(seed++);
    t3.forward_backward(b.x, b.y, n, ctx), t1.forward_backward(b.x, b.y, n, ctx);
    CHECK(max_abs_diff(one.grads(), three.grads()) < 1e-6);
    CHECK(max_abs_diff(logits(t1, n), logits(t3, n)) < 1e-5);
  }
}

TEST_CASE(
    "training with threads: bitwise repeatable for a thread count, equal to rounding across "
    "counts") {
  test::TempDir dir;
  test::write_synthetic_dataset(dir / "d.h5", 300, 60, 3);
  Comm comm;
  TrainOptions o = test::short_run(dir / "d.h5", kSpec, 2, 24);
  std::ostringstream out;
  const auto one = fit(o, comm, out);
  o.threads = 3;
  const auto three = fit(o, comm, out);
  CHECK(fit(o, comm, out).params == three.params);  // no timing in the result
  CHECK(max_abs_diff(one.params, three.params) < 1e-4);
  CHECK(three.epochs.back().val_accuracy == Approx(one.epochs.back().val_accuracy).margin(0.02));
  o.threads = 2;
  CHECK(max_abs_diff(one.params, fit(o, comm, out).params) < 1e-4);
}

// A batch too small to split (mlp at the magazine's batch 8): the first dense layer's kernel is
// split across the threads instead, its rows a block a thread, its partial products summed in
// part order.
TEST_CASE(
    "training a small batch with threads: the kernel split, bitwise repeatable, equal to rounding "
    "across counts") {
  test::TempDir dir;
  test::write_synthetic_dataset(dir / "d.h5", 300, 60, 3);
  // 50,176 weights in the kernel.
  const char* spec = "flatten dense(64,relu) dropout(0.2) dense(classes,softmax)";
  Model model(spec, 3);
  ThreadPool pool3(3);
  REQUIRE(ThreadedModel(model, pool3).shares(8) == 1);
  Comm comm;
  TrainOptions o = test::short_run(dir / "d.h5", spec, 2, 8);
  std::ostringstream out;
  const auto one = fit(o, comm, out);
  for (int threads : {2, 3}) {
    o.threads = threads;
    const auto many = fit(o, comm, out);
    CHECK(fit(o, comm, out).params == many.params);  // no timing in the result
    CHECK(max_abs_diff(one.params, many.params) < 1e-4);
    // The kernel was split: its partial products add in another order.
    CHECK(many.params != one.params);
  }
}

TEST_CASE("evaluation with threads counts every image once") {
  const Split data = test::synthetic_split(530, 3, 6);  // two batches of 256 and a short one
  Model model(kSpec, 3);
  model.init_params(2);
  Comm comm;
  ThreadPool pool1(1), pool2(2);
  ThreadedModel t1(model, pool1);
  const Evaluation a = evaluate(t1, data, comm);
  ThreadedModel t2(model, pool2);
  const Evaluation b = evaluate(t2, data, comm);
  CHECK(b.count == 530);
  CHECK(b.confusion == a.confusion);
  CHECK(b.loss == Approx(a.loss).epsilon(1e-9));
  model.init_params(3);  // new weights: the threads' copy of them follows
  const Evaluation c = evaluate(t1, data, comm), d = evaluate(t2, data, comm);
  CHECK(d.confusion == c.confusion);
  CHECK(d.loss == Approx(c.loss).epsilon(1e-9));
  CHECK(c.loss != Approx(a.loss).epsilon(1e-6));  // the new weights do change the loss
}

// Crowded cores (ThreadedModel): the calling thread computes the shares from the first, the
// workers from the last, and where it comes to a share that a worker has not finished it
// computes that one itself. Either way a share is the same bits.
TEST_CASE(
    "crowded cores: shares with backups give the same bits as free cores, workers' shares too") {
  const int classes = 3;
  // 7 rows on 4 threads: 7 shares, more than the threads.
  for (const auto& [threads, n] : {std::pair<int, int>{2, 32}, {3, 32}, {4, 7}}) {
    const SyntheticBatch batch(n, classes, 8);
    const Batch& b = batch.b;
    SideBySide m(kSpec, classes, 5, threads, Cores::crowded);
    REQUIRE(m.threaded.shares(n) > threads);  // a thread computes several shares
    // Steps of plain SGD, at least until a worker's share was used.
    for (int step = 0; step < 20 || (m.threaded.worker_shares() == 0 && step < 2000); ++step) {
      const Context ctx{true, uint64_t(step)};
      const LossStats on_free_cores = m.reference.forward_backward(b.x, b.y, n, ctx);
      const LossStats on_crowded_cores = m.threaded.forward_backward(b.x, b.y, n, ctx);
      REQUIRE(m.model.grads() == m.reference_model.grads());
      REQUIRE(on_crowded_cores.loss_sum == on_free_cores.loss_sum);
      REQUIRE(on_crowded_cores.correct == on_free_cores.correct);
      sgd_step(m.reference_model), sgd_step(m.model);
    }
    CHECK(m.threaded.worker_shares() > 0);
  }
}

// The workers' scratch reads the weights from a slot while crowded, from the model while free:
// each switch must leave them reading the current weights.
TEST_CASE("crowded cores: switching between crowded and free batches trains as free cores alone") {
  const int classes = 3;
  for (const auto& [spec, n] : {std::pair<const char*, int>{kSpec, 32}, {"mlp", 128}}) {
    const SyntheticBatch batch(n, classes, 10);
    const Batch& b = batch.b;
    SideBySide m(spec, classes, 7, 2, Cores::free);
    REQUIRE(m.threaded.shares(n) > 1);
    for (int step = 0; step < 24; ++step) {
      m.pool.set_cores(step % 6 < 3 ? Cores::crowded : Cores::free);
      const Context ctx{true, uint64_t(step)};
      m.reference.forward_backward(b.x, b.y, n, ctx), m.threaded.forward_backward(b.x, b.y, n, ctx);
      REQUIRE(m.model.grads() == m.reference_model.grads());
      sgd_step(m.reference_model), sgd_step(m.model);
    }
  }
}

TEST_CASE("crowded cores: a batch never waits for a worker that the OS holds back inside a share") {
  const int classes = 3, n = 32;
  const SyntheticBatch batch(n, classes, 9);
  const Batch& b = batch.b;
  SideBySide m(kSpec, classes, 6, 2, Cores::crowded);
  // The first share the worker claims, it holds until released, as a thread that gets no core.
  std::atomic<int> claims{0};
  std::atomic<bool> release{false};
  m.threaded.after_worker_claim = [&] {
    if (claims++ == 0)
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  const Context ctx{true, 3};
  auto steps = std::async(std::launch::async, [&] {
    for (int step = 0; claims == 0 && step < 2000; ++step)
      m.threaded.forward_backward(b.x, b.y, n, ctx);
    // The worker held.
    for (int step = 0; step < 5; ++step) m.threaded.forward_backward(b.x, b.y, n, ctx);
  });
  const bool finished = steps.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  release = true;
  steps.get();
  CHECK(finished);
  CHECK(claims == 1);
  CHECK(m.threaded.worker_shares() == 0);
  m.reference.forward_backward(b.x, b.y, n, ctx);
  CHECK(m.model.grads() == m.reference_model.grads());
}

// Nothing else runs beside this test (test/meson.build: not in parallel): two threads that each
// have a core of their own must find the cores free, or the pool would train with backups on an
// idle Pi.
TEST_CASE("crowded cores: an idle machine reads as idle") {
  if (std::thread::hardware_concurrency() < 2) {
    WARN("skipped: one core, which two threads do crowd");
    return;
  }
  ThreadPool pool(2);
  if (pool.cores_text().rfind("measured", 0) != 0) {
    WARN("skipped: the cores cannot be measured here (" << pool.cores_text() << ")");
    return;
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
  std::atomic<int64_t> spins{0};
  while (std::chrono::steady_clock::now() < until)
    pool.run(2, [&](int) {  // a step's job: a few hundred microseconds on each thread
      const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(300);
      while (std::chrono::steady_clock::now() < end) ++spins;
    });
  CHECK_FALSE(pool.crowded());
}
