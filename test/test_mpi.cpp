// Multi-rank tests, run under mpirun -np 2 and -np 4 (also correct, if trivial, on one rank).
#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <ctime>
#include <sstream>
#include <thread>
#include <utility>

#include "helpers.h"
#include "pitrain/checkpoint.h"
#include "pitrain/error.h"
#include "pitrain/fit.h"
#include "pitrain/run_control.h"

using namespace pitrain;

namespace {

// Every rank's copy of v equals rank 0's, bit for bit.
bool same_on_every_rank(const std::vector<float>& v) {
  std::vector<float> root = v;
  MPI_Bcast(root.data(), int(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  int same = root == v;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return same == 1;
}

// A rank's update at a step to a (rows, cols) weight, and to a bias-like rest after it (from
// index rows * cols on): of rank 2 and different on every rank, so that the ranks' mean has rank
// > 1, which rounds of rank 1 cannot carry whole.
float rank2_update(int rank, int step, int64_t i, int64_t rows, int64_t cols) {
  if (i >= rows * cols) return 0.01f * float(rank + step + 1);
  const int64_t r = i / cols, c = i % cols;
  return 0.05f * (std::sin(float(r * (rank + 1) + step)) * std::cos(float(c + rank)) +
                  std::cos(float(r + step)) * std::sin(float(c * (rank + 2))));
}

}  // namespace

TEST_CASE("the ranks' slices cover every row once") {
  test::TempDir dir;
  test::write_synthetic_dataset(dir / "d.h5", 103, 17, 3);
  Comm comm;
  auto s = load_rank_slice(dir / "d.h5", "train", comm.rank(), comm.size());
  // (first row, rows) of every rank: each slice starts where the one before ends, from 0 to 103
  const int64_t mine[2] = {s.first_row, int64_t(s.data.size())};
  std::vector<int64_t> all(size_t(2 * comm.size()));
  MPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, comm.raw());
  CHECK(all[0] == 0);
  for (int r = 1; r < comm.size(); ++r)
    CHECK(all[size_t(2 * r)] == all[size_t(2 * r - 2)] + all[size_t(2 * r - 1)]);
  CHECK(all[size_t(2 * comm.size() - 2)] + all[size_t(2 * comm.size() - 1)] == 103);
  const auto full = test::synthetic_split(103, 3, 1);
  CHECK(std::equal(s.data.labels.begin(), s.data.labels.end(), full.labels.begin() + s.first_row));
}

TEST_CASE(
    "all_equal: true where every rank holds the value, false on every rank where one differs") {
  Comm comm;
  CHECK(comm.all_equal(0x0123456789abcdefULL));
  CHECK(comm.all_equal(0));
  CHECK(comm.all_equal(~0ULL));
  CHECK(comm.all_equal(uint64_t(comm.rank() == comm.size() - 1 ? 7 : 8)) == (comm.size() == 1));
}

TEST_CASE("a rank waiting for a collective leaves its CPU to others") {
  Comm comm;
  const auto thread_cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  };
  const bool late = comm.rank() == comm.size() - 1;
  if (late) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const double wall0 = MPI_Wtime(), cpu0 = thread_cpu_seconds();
  double one = 1;
  comm.allreduce_sum(&one, 1);
  const double wall = MPI_Wtime() - wall0, cpu = thread_cpu_seconds() - cpu0;
  CHECK(one == comm.size());
  // MPI's own wait would spin through the whole wait for the late rank.
  if (!late) CHECK(cpu < 0.2 * wall);
  INFO("rank " << comm.rank() << ": " << cpu << " s of CPU in a wait of " << wall << " s");
}

TEST_CASE("connect_all: every pair exchanges one message, and none is left over") {
  Comm comm;
  comm.connect_all();
  comm.connect_all();  // twice: a second call must pair with the second call on the other ranks
  MPI_Barrier(MPI_COMM_WORLD);  // every rank's messages are sent: a stray one has 100 ms to arrive
  int pending = 0;
  for (const double until = MPI_Wtime() + 0.1; !pending && MPI_Wtime() < until;)
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &pending, MPI_STATUS_IGNORE);
  MPI_Allreduce(MPI_IN_PLACE, &pending, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(pending == 0);
}

TEST_CASE("P ranks with batch b make the same update as 1 rank with batch P*b") {
  Comm comm;
  const int b = 4, P = comm.size(), classes = 3;
  const std::string spec = "conv2d(4,3,relu) maxpool2d flatten dense(6,relu) dense(classes)";
  Model distributed(spec, classes), reference(spec, classes);
  distributed.init_params(3), reference.init_params(3);
  Adam opt_d(distributed.num_params()), opt_r(reference.num_params());
  auto sync = make_sync_strategy(comm, distributed.params().data(), distributed.num_params(), {});
  ThreadPool one_thread(1);
  ThreadedModel threaded(distributed, one_thread);
  for (int step = 0; step < 3; ++step) {
    const Split global = test::synthetic_split(P * b, classes, uint64_t(10 + step));
    BatchLoader loader(global, P * b);
    loader.reset_in_order();
    const Batch all = loader.next();
    train_step(threaded, opt_d, *sync, all.x + comm.rank() * b * kImagePixels,
               all.y + comm.rank() * b, b, 1e-2f, {}, step);
    reference.forward_backward(all.x, all.y, P * b, {});
    opt_r.step(reference.params().data(), reference.grads().data(), reference.num_params(), 1e-2f);
  }
  double worst = 0;
  for (size_t i = 0; i < reference.params().size(); ++i)
    worst = std::max(worst, double(std::abs(distributed.params()[i] - reference.params()[i])));
  // Summation order differs; a wrong average or a missing rank is off by ~1e-2.
  CHECK(worst < 2e-5);
  CHECK(same_on_every_rank(distributed.params()));
}

TEST_CASE("after training the weights are identical on every rank; same seed, same weights") {
  test::TempDir dir;
  test::write_synthetic_dataset(dir / "d.h5", 320, 80, 4);
  Comm comm;
  TrainOptions o = test::short_run(dir / "d.h5", "cnn", 2, 8);
  std::ostringstream out;
  const auto a = fit(o, comm, out);
  CHECK(same_on_every_rank(a.params));
  CHECK(a.epochs.back().val_accuracy > 0.9);
  CHECK(fit(o, comm, out).params == a.params);
}

TEST_CASE("an epoch's seconds are the slowest rank's: the same on every rank") {
  test::TempDir dir;
  test::write_synthetic_dataset(dir / "d.h5", 320, 80, 4);
  Comm comm;
  TrainOptions o = test::short_run(dir / "d.h5", "mlp", 2, 8);
  o.sync.strategy = "local-sgd", o.sync.sync_every = 3, o.sync.overlap = true;
  std::ostringstream out;
  for (const EpochResult& e : fit(o, comm, out).epochs) {
    double seconds[2] = {e.seconds, -e.seconds};
    MPI_Allreduce(MPI_IN_PLACE, seconds, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    CHECK(seconds[0] == -seconds[1]);
    CHECK(e.seconds > 0);
  }
  // Ranks that took 1, 2, ... P seconds: the job took P.
  CHECK(slowest_rank_seconds(comm, comm.rank() + 1.0) == comm.size());
}

TEST_CASE("resume equals uninterrupted on the same ranks, and reshards onto another count") {
  test::TempDir dir;
  test::write_synthetic_dataset(dir / "d.h5", 240, 60, 4);
  Comm comm;
  TrainOptions o = test::short_run(dir / "d.h5", "mlp", 3, 8);
  o.steps_per_epoch = 6;
  std::ostringstream out;
  // Adam, and SGD with momentum: each optimizer's state travels in the checkpoint.
  for (const auto& [optimizer, momentum] : {std::pair{"adam", 0.0f}, std::pair{"sgd", 0.9f}}) {
    INFO(optimizer);
    TrainOptions run = o;
    run.optimizer = optimizer, run.momentum = momentum;
    const auto full = fit(run, comm, out);
    run.epochs = 1;
    run.checkpoint = dir / "one.h5";
    fit(run, comm, out);
    run.epochs = 3;
    run.resume = dir / "one.h5";
    run.checkpoint.clear();
    CHECK(fit(run, comm, out).params == full.params);
  }

  // Rank 0 alone trains an epoch, then all ranks continue from its checkpoint.
  MPI_Comm solo;
  MPI_Comm_split(MPI_COMM_WORLD, comm.rank() == 0 ? 0 : MPI_UNDEFINED, 0, &solo);
  if (comm.rank() == 0) {
    Comm one(solo);
    TrainOptions s = o;
    s.resume.clear();
    s.epochs = 1;
    s.checkpoint = dir / "solo.h5";
    fit(s, one, out);
    MPI_Comm_free(&solo);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  o.resume = dir / "solo.h5";
  const auto resharded = fit(o, comm, out);
  CHECK(resharded.epochs.size() == 2);
  CHECK(resharded.epochs.front().epoch == 2);
  CHECK(same_on_every_rank(resharded.params));

  // Stopped 12 steps into an epoch of 20, resumed with epochs of 10: the epoch goes on from its
  // 6th step, 4 steps left (not from min(12, 10), which would leave none).
  if (comm.rank() == 0) {
    Checkpoint c = load_checkpoint(dir / "solo.h5");
    auto opt = make_optimizer(c.optimizer, c.model.num_params(), 0);
    restore_optimizer(c, *opt, dir / "solo.h5");
    save_checkpoint(dir / "mid.h5", c.model, *opt, RunState{0, 12, 12, c.state.seed, 20},
                    c.class_names);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  o.resume = dir / "mid.h5";
  o.steps_per_epoch = 10;
  o.epochs = 1;
  const auto mid = fit(o, comm, out);
  REQUIRE(mid.epochs.size() == 1);
  CHECK(mid.epochs.front().steps == 4);
}

TEST_CASE(
    "sync options: K = 1 is per-step sync; local SGD and 16-bit gradients keep the ranks equal") {
  test::TempDir dir;
  test::write_synthetic_dataset(dir / "d.h5", 320, 80, 4);
  Comm comm;
  TrainOptions o = test::short_run(
      dir / "d.h5", "conv2d(8,3,relu) maxpool2d flatten dense(classes,softmax)", 2, 8);
  std::ostringstream out;
  auto fit_agreed = [&] {  // trains, and checks that the ranks end with the same weights
    auto r = fit(o, comm, out);
    CHECK(same_on_every_rank(r.params));
    return r;
  };
  const auto base = fit(o, comm, out);
  o.sync.sync_every = 1;
  o.sync.sync_warmup = 5;
  CHECK(fit(o, comm, out).params == base.params);

  // Every 3 steps and at the end (validation between: the last round's model).
  o.sync.strategy = "local-sgd", o.sync.sync_every = 3;
  const auto local = fit_agreed();
  CHECK(local.epochs.back().val_accuracy > 0.9);
  if (comm.size() > 1) CHECK(local.params != base.params);

  o.sync.overlap = true;  // each average applied one round late
  const auto late = fit_agreed();
  CHECK(late.epochs.back().val_accuracy > 0.9);
  if (comm.size() > 1) CHECK(late.params != local.params);

  // --sync auto's rare rounds: the ranks' own steps at a share of --lr.
  o.sync.inner_lr_scale = 0.5f;
  const auto shorter = fit_agreed();
  CHECK(shorter.params != late.params);
  o.sync.inner_lr_scale = 1.0f;
  const float lr = o.lr;
  o.lr = 0.5f * lr;
  CHECK(fit_agreed().params == shorter.params);
  o.lr = lr;

  o.sync = SyncOptions{};
  o.sync.wire = WireType::fp16;
  o.sync.error_feedback = true;
  CHECK(fit_agreed().epochs.back().val_accuracy > 0.9);

  o.sync = SyncOptions{};
  o.sync.wire = WireType::int8;  // blocks with their own scales, in buckets that end mid-block
  o.sync.error_feedback = true;
  o.sync.overlap = true;
  o.sync.bucket_bytes = 5000;
  CHECK(fit_agreed().epochs.back().val_accuracy > 0.9);

  o.sync = SyncOptions{};
  o.sync.wire = WireType::int4;  // --sync auto's blocking rounds every 8 steps
  o.sync.error_feedback = true;
  o.sync.strategy = "local-sgd", o.sync.sync_every = 8;
  CHECK(fit_agreed().epochs.back().val_accuracy > 0.9);

  o.sync = SyncOptions{};
  o.sync.overlap = true;
  o.sync.bucket_bytes = 4096;  // several buckets, started during backward
  const auto overlapped = fit_agreed();
  double worst = 0;
  for (size_t i = 0; i < base.params.size(); ++i)
    worst = std::max(worst, double(std::abs(overlapped.params[i] - base.params[i])));
  CHECK(worst < 1e-4);  // the same sums, possibly added in another order
}

TEST_CASE(
    "local SGD rounds: what the ranks learnt is averaged; with overlap one round late, or after "
    "--overlap-steps") {
  Comm comm;
  const int64_t n = 6;
  const std::vector<float> start = {1, -2, 0.5f, 3, 0, -1};
  // The update a rank makes at a step (exact in binary: on 1, 2 or 4 ranks the averages are too).
  auto update = [&](int rank, int step, int64_t i) {
    return 0.125f * float((rank + 1) * (step + 1)) + 0.25f * float(i);
  };
  auto mean_update = [&](int step, int64_t i) {
    float s = 0;
    for (int r = 0; r < comm.size(); ++r) s += update(r, step, i);
    return s / float(comm.size());
  };
  // This rank's update, then the strategy's.
  auto take_step = [&](std::vector<float>& p, SyncStrategy& sync, int step) {
    for (int64_t i = 0; i < n; ++i) p[size_t(i)] += update(comm.rank(), step, i);
    sync.after_update(p.data(), step);
  };
  for (const auto& [overlap, overlap_steps] :
       {std::pair{false, 0}, std::pair{true, 0}, std::pair{true, 1}}) {
    SyncOptions o;
    o.strategy = "local-sgd", o.sync_every = 2;
    o.overlap = overlap;
    o.overlap_steps = overlap_steps;
    std::vector<float> p = start;
    auto sync = make_sync_strategy(comm, p.data(), n, o);
    for (int step = 0; step < 4; ++step) {
      take_step(p, *sync, step);
      if (step == 1 && !overlap) {  // averaged at once
        for (int64_t i = 0; i < n; ++i)
          CHECK(p[size_t(i)] == Approx(start[size_t(i)] + mean_update(0, i) + mean_update(1, i)));
      }
      // The round of steps 0-1 applied a step after it started.
      if (step == 2 && overlap_steps == 1) {
        for (int64_t i = 0; i < n; ++i)
          CHECK(p[size_t(i)] == Approx(start[size_t(i)] + mean_update(0, i) + mean_update(1, i) +
                                       update(comm.rank(), 2, i)));
      }
      // Validation: the round of steps 0-1 (finished now); step 2 own.
      if (step == 2 && comm.size() > 1) {
        const float* common = sync->common_params(p.data(), step);
        CHECK(same_on_every_rank(std::vector<float>(common, common + n)));
        for (int64_t i = 0; i < n; ++i) {
          CHECK(common[i] == Approx(start[size_t(i)] + mean_update(0, i) + mean_update(1, i)));
          CHECK(p[size_t(i)] == Approx(common[i] + update(comm.rank(), 2, i)));
        }
      }
      if (step == 3 && overlap) {  // the round of steps 0-1 arrived; steps 2-3 stay this rank's own
        for (int64_t i = 0; i < n; ++i)
          CHECK(p[size_t(i)] == Approx(start[size_t(i)] + mean_update(0, i) + mean_update(1, i) +
                                       update(comm.rank(), 2, i) + update(comm.rank(), 3, i)));
      }
    }
    sync->agree(p.data(), 3);  // the epoch end: every rank the same
    for (int64_t i = 0; i < n; ++i) {
      float want = start[size_t(i)];
      for (int step = 0; step < 4; ++step) want += mean_update(step, i);
      CHECK(p[size_t(i)] == Approx(want));
    }
    CHECK(same_on_every_rank(p));
  }
  // Validation beside a round applied at the next round, K = 8: a round 1 step old (under K/4)
  // is left in flight and the common model before it validated; one 2 steps old is waited for.
  if (comm.size() == 1) return;  // one rank: nothing in flight
  SyncOptions o;
  o.strategy = "local-sgd", o.sync_every = 8;
  o.overlap = true;
  std::vector<float> p = start;
  auto sync = make_sync_strategy(comm, p.data(), n, o);
  for (int step = 0; step < 10; ++step) {
    take_step(p, *sync, step);
    if (step < 8) continue;
    const float* common = sync->common_params(p.data(), step);
    CHECK(same_on_every_rank(std::vector<float>(common, common + n)));
    for (int64_t i = 0; i < n; ++i) {
      float want = start[size_t(i)];
      for (int s = 0; step == 9 && s < 8; ++s) want += mean_update(s, i);
      CHECK(common[i] == Approx(want));
    }
  }
}

TEST_CASE(
    "PowerSGD over the ranks: the mean (to int4 rounding) when the ranks' weights span at most r "
    "dimensions") {
  Comm comm;
  // Factor columns of 40 and 30 values: a block each.
  const int64_t rows = 40, cols = 30, n = rows * cols + 7;
  WireOptions opts;
  // >= ranks (at most 4 here): the mean of one outer product a rank has rank <= 4.
  opts.low_rank = 4;
  opts.matrices = {{0, rows, cols}};
  auto value = [&](int rank, int64_t i) {
    if (i >= rows * cols) return float(rank + 1) * float(i);  // the bias-like rest, sent whole
    const int64_t r = i / cols, c = i % cols;
    return std::sin(float(r * (rank + 1))) * std::cos(float(c + rank));
  };
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value(comm.rank(), i);
  auto wire = make_wire_average(WireType::powersgd, comm, n, opts);
  for (int round = 0; round < 2; ++round) {  // the second round starts warm, from the first's Q
    wire->start(v.data(), 0, n);
    const std::vector<float>& got = wire->finish();
    double error_weight = 0, norm_weight = 0, worst_rest = 0;
    for (int64_t i = 0; i < n; ++i) {
      double mean = 0;
      for (int r = 0; r < comm.size(); ++r) mean += value(r, i) / comm.size();
      const double error = std::abs(got[size_t(i)] - mean);
      if (i < rows * cols)
        error_weight += error * error, norm_weight += mean * mean;
      else
        worst_rest = std::max(worst_rest, error / mean);
    }
    // int4 keeps 1/14 of a block's largest value, rounded in P, in Q and at each step of the
    // reduction (each factor column has blocks of its own), and the second round also carries
    // what the first one's rounding left out. Measured on 1-4 ranks: the weight off by 0.06-0.12
    // of its norm in the first round, 0.12-0.22 in the second; the rest 0.005 of each value at
    // most, and 1/128 more where int4's bfloat16 scale rounded up (measured: 0.011). A wrong
    // factor would be off by about the weight's norm.
    CHECK(std::sqrt(error_weight / norm_weight) < 0.3);
    CHECK(worst_rest < 0.015);
    CHECK(same_on_every_rank(got));
  }
}

TEST_CASE(
    "PowerSGD's residual is the rank's own: its values less their projection on the common P") {
  Comm comm;
  const int64_t rows = 40, cols = 30, n = rows * cols;
  WireOptions opts;
  // >= ranks: each rank's weight is of rank 1, and their mean of rank P (the factors of the
  // ranks are independent), so P spans every rank's weight, which projects onto itself.
  opts.low_rank = 4;
  opts.matrices = {{0, rows, cols}};
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = std::sin(float(i / cols * (comm.rank() + 1))) *
                   std::cos(float(i % cols * (comm.rank() + 2)));
  auto wire = make_wire_average(WireType::powersgd, comm, n, opts);
  wire->start(v.data(), 0, n);
  const std::vector<float>& mean = wire->finish();
  double own = 0, off_mean = 0, norm = 0;  // this rank's residual; its values less the mean
  for (int64_t i = 0; i < n; ++i) {
    const double x = v[size_t(i)];
    own += std::pow(wire->residual()[size_t(i)], 2), off_mean += std::pow(x - mean[size_t(i)], 2),
        norm += x * x;
  }
  // Left: int4's rounding of the rank's Q and of P's basis, measured 0.07-0.24 of the norm on
  // 1-4 ranks; M less the mean's approximation (the residual before) is off by the ranks'
  // differences, 0.7-0.88 of it on 2-4 ranks.
  CHECK(std::sqrt(own / norm) < 0.35);
  if (comm.size() > 1) CHECK(std::sqrt(off_mean / norm) > 0.6);
}

TEST_CASE("local SGD with low-rank rounds: what a round did not carry stays in the rank's model") {
  Comm comm;
  if (comm.size() == 1) return;  // one rank syncs nothing
  const int64_t rows = 40, cols = 30, n = rows * cols + 5;
  auto update = [&](int rank, int step, int64_t i) {
    return rank2_update(rank, step, i, rows, cols);
  };
  for (const bool overlap : {false, true}) {
    INFO("overlap " << overlap);
    SyncOptions o;
    o.strategy = "local-sgd", o.sync_every = 2, o.overlap = overlap, o.wire = WireType::powersgd,
    o.powersgd_rank = 1;
    std::vector<float> p(size_t(n), 0.5f);
    auto sync = make_sync_strategy(comm, p.data(), n, o, {{0, rows, cols}});
    // Overlapped, the round of steps 0-1 is applied after step 3.
    const int steps = overlap ? 4 : 2;
    for (int step = 0; step < steps; ++step) {
      for (int64_t i = 0; i < n; ++i) p[size_t(i)] += update(comm.rank(), step, i);
      sync->after_update(p.data(), step);
    }
    // The ranks' models together keep all they learnt: their mean is the mean of every rank's
    // steps, to the int4 rounding of the Q sum (measured 0.006-0.008 on 2-4 ranks). The round
    // carried only its rank-1 approximation: the common model misses a direction of the size of
    // the updates (measured 0.065-0.155). Each rank keeps the rest of its own, so the ranks differ.
    std::vector<float> mean_p = p;
    MPI_Allreduce(MPI_IN_PLACE, mean_p.data(), int(n), MPI_FLOAT, MPI_SUM, comm.raw());
    const float* common = sync->common_params(p.data(), steps - 1);
    double worst = 0, worst_common = 0;
    for (int64_t i = 0; i < n; ++i) {
      double want = 0.5;
      for (int step = 0; step < steps; ++step)
        for (int r = 0; r < comm.size(); ++r) want += update(r, step, i) / comm.size();
      worst = std::max(worst, std::abs(mean_p[size_t(i)] / comm.size() - want));
      worst_common = std::max(worst_common, std::abs(common[i] - want));
    }
    CHECK(worst < 0.025);
    CHECK(worst_common > 0.04);
    CHECK_FALSE(same_on_every_rank(p));
    sync->agree(p.data(), steps - 1);  // an agreement leaves every rank the same
    CHECK(same_on_every_rank(p));
  }
}

TEST_CASE("local SGD's last agreement: what the low-rank rounds left out reaches every rank") {
  Comm comm;
  if (comm.size() == 1) return;  // one rank syncs nothing
  const int64_t rows = 40, cols = 30, n = rows * cols + 5;
  auto update = [&](int rank, int step, int64_t i) {
    return rank2_update(rank, step, i, rows, cols);
  };
  auto run = [&](bool final) {  // 4 steps, rounds after steps 1 and 3, then the agreement
    SyncOptions o;
    o.strategy = "local-sgd", o.sync_every = 2;
    o.wire = WireType::powersgd;
    o.powersgd_rank = 1;
    std::vector<float> p(size_t(n), 0.5f);
    auto sync = make_sync_strategy(comm, p.data(), n, o, {{0, rows, cols}});
    for (int step = 0; step < 4; ++step) {
      for (int64_t i = 0; i < n; ++i) p[size_t(i)] += update(comm.rank(), step, i);
      sync->after_update(p.data(), step);
    }
    if (final)
      sync->agree_final(p.data(), 3);
    else
      sync->agree(p.data(), 3);
    CHECK(same_on_every_rank(p));
    double worst = 0;  // against the exact mean of what the ranks learnt
    for (int64_t i = 0; i < n; ++i) {
      double want = 0.5;
      for (int step = 0; step < 4; ++step)
        for (int r = 0; r < comm.size(); ++r) want += update(r, step, i) / comm.size();
      worst = std::max(worst, std::abs(p[size_t(i)] - want));
    }
    return worst;
  };
  // Off by the int4 rounding of the rounds' Q sums, which error feedback does not see (a rank's
  // residual is its own values less their projection, not the rounded sum's: measured 0.011-0.016
  // on 2-4 ranks; int8's rounding alone, ~1/254 of values up to ~0.4, is 0.0008-0.001); a
  // round of rank 1 leaves out a whole direction of the mean, of the size of the updates
  // themselves (measured 0.057-0.075).
  CHECK(run(true) < 0.025);
  CHECK(run(false) > 0.04);
}

TEST_CASE(
    "local SGD after a warm-up: what rounding left of the warm-up's gradients does not move the "
    "weights") {
  Comm comm;
  if (comm.size() == 1) return;  // one rank syncs nothing
  const int64_t n = 200;
  std::vector<float> grads(size_t(n), 0.0f);
  // int8 in one block of scale 1000/127: the 1 rounds to 0, into the residual.
  grads[0] = 1000.0f, grads[1] = 1.0f;
  auto opt = make_optimizer("sgd", n, 0);
  // A round after steps 1-2, or the last agreement before any round.
  for (const bool final : {false, true}) {
    SyncOptions o;
    o.strategy = "local-sgd", o.sync_every = 2, o.sync_warmup = 1, o.wire = WireType::int8,
    o.error_feedback = true;
    const std::vector<float> start(size_t(n), 0.5f);
    std::vector<float> p = start;
    auto sync = make_sync_strategy(comm, p.data(), n, o);
    const int steps = final ? 2 : 3;
    // The gradients averaged at step 0; no step taken with them.
    for (int step = 0; step < steps; ++step) {
      std::vector<float> g = grads;
      sync->gradients_ready(g.data(), 0, step);
      sync->reduce_gradients(g.data(), step, *opt);
      sync->after_update(p.data(), step);
    }
    if (final) sync->agree_final(p.data(), 1);
    CHECK(p == start);
  }
}

TEST_CASE("local SGD's outer optimizer: Nesterov momentum on the rounds' mean change") {
  Comm comm;
  if (comm.size() == 1) return;  // one rank syncs nothing: no rounds to check
  const int64_t n = 3;
  SyncOptions o;
  o.strategy = "local-sgd", o.sync_every = 1 + 1;  // rounds after steps 1 and 3
  o.outer_lr = 0.5f;
  o.outer_momentum = 0.75f;
  std::vector<float> p = {1, 2, 3};
  auto sync = make_sync_strategy(comm, p.data(), n, o);
  // A rank moves by (rank + 1) x 0.25 a step: the mean change of a round is 2 x 0.25 x (P + 1) / 2.
  const float mean_change = 0.25f * float(comm.size() + 1);
  float momentum = 0, anchor = 0;
  for (int step = 0; step < 4; ++step) {
    for (float& x : p) x += 0.25f * float(comm.rank() + 1);
    sync->after_update(p.data(), step);
    if (step % 2 == 1) {
      momentum = 0.75f * momentum + mean_change;
      anchor += 0.5f * (mean_change + 0.75f * momentum);
      for (int64_t i = 0; i < n; ++i) CHECK(p[size_t(i)] == Approx(float(i + 1) + anchor));
    }
  }
  CHECK(same_on_every_rank(p));
}

// Runs `steps` steps of overlapped local SGD (K = 2, up to 8) on n values, of which each step
// changes a few and takes `rank0_ms` on rank 0 (no time on the others). At each meeting the ranks
// vote what `vote_cost` makes of this rank's take_round_cost(), as RunControl::after_step does with
// it unchanged (an empty `vote_cost`: no votes, K stays). Returns K after each step and this rank's
// timed round costs; checks that the ranks agree on K at every step and on the parameters at the
// end.
struct AdaptedRun {
  std::vector<int> every_at, costs;
};
AdaptedRun run_adapting_k(Comm& comm, int64_t n, int rank0_ms, int steps,
                          const std::function<int(int)>& vote_cost) {
  SyncOptions o;
  o.strategy = "local-sgd", o.sync_every = 2;
  o.overlap = true;
  o.max_sync_every = 8;
  std::vector<float> p(size_t(n), 1.0f);
  auto sync = make_sync_strategy(comm, p.data(), n, o);
  StopVote vote(comm);
  AdaptedRun run;
  for (int step = 0; step < steps; ++step) {
    if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(rank0_ms));
    for (int i = 0; i < 4; ++i) p[size_t(i)] += 0.125f * float(comm.rank() + 1);
    sync->after_update(p.data(), step);
    if (sync->meets_at(step)) {
      const int cost = sync->take_round_cost();
      if (cost != kNotTimed) run.costs.push_back(cost);
      if (vote_cost) {
        const Vote agreed = vote.exchange({0, vote_cost(cost)});
        CHECK(agreed.signal == 0);
        sync->pace(step, agreed.round_cost);
      }
    }
    run.every_at.push_back(sync->sync_every());
  }
  CHECK(same_on_every_rank(std::vector<float>(run.every_at.begin(), run.every_at.end())));
  sync->agree(p.data(), steps - 1);
  CHECK(same_on_every_rank(p));
  return run;
}

TEST_CASE(
    "local SGD that adapts K: votes that say slow double it, at the same step on every rank") {
  Comm comm;
  if (comm.size() == 1) return;  // one rank has no rounds
  // Where a round was timed, rank 0 votes that it cost a quarter of the time, which doubling K
  // brings under the bound; the others vote 0, and the largest wins. Rounds after steps 1, 3,
  // 5, 7; the votes of 3 and 5 (read at 5 and 7) say slow: K = 4 from step 7 on. The vote read
  // at 11 is of a K = 2 round; those of 15 and 19 say slow again: K = 8 from step 19 on, the
  // maximum (RoundPace's test has the rule's other cases).
  const std::vector<int> slow = run_adapting_k(comm, 4, 0, 40, [&](int cost) {
                                  if (cost == kNotTimed) return cost;
                                  return comm.rank() == 0 ? 250 : 0;
                                }).every_at;
  CHECK(slow[6] == 2);
  CHECK(slow[7] == 4);
  CHECK(slow[18] == 4);
  CHECK(slow[19] == 8);
  CHECK(slow.back() == 8);
  // Votes that say the rounds cost no rank anything leave K as it is.
  const std::vector<int> fast = run_adapting_k(comm, 4, 0, 40, [](int cost) {
                                  return cost == kNotTimed ? cost : 0;
                                }).every_at;
  CHECK(fast.back() == 2);
  // 4 MB rounds beside steps without MPI calls, voted as measured: what they cost depends on
  // the machine, but every rank holds the same K at every step (checked in the run).
  CHECK(run_adapting_k(comm, int64_t(1) << 20, 0, 40, [](int c) { return c; }).every_at.back() <=
        8);
}

TEST_CASE("local SGD times its rounds: a rank that waits for a late one reads them as costly") {
  Comm comm;
  if (comm.size() == 1) return;
  // Rank 0 takes 20 ms a step. The others, with steps of no time, reach each round's finish
  // before rank 0 has started it: they spend most of their time waiting in the rounds' work,
  // rank 0 little. No votes: a vote at each meeting would let the collective finish while the
  // others wait for rank 0's vote, or not, as the machine's timing has it.
  const std::vector<int> costs = run_adapting_k(comm, 4, 20, 24, nullptr).costs;
  REQUIRE(costs.size() >= 8);
  std::vector<int> sorted = costs;
  std::sort(sorted.begin(), sorted.end());
  const int median = sorted[sorted.size() / 2];
  INFO("rank " << comm.rank() << " round costs (per mille), median " << median);
  if (comm.rank() == 0)
    CHECK(median < kSlowRoundCost);
  else
    CHECK(median > 500);
}

TEST_CASE("run_together: whatever one rank throws, every rank leaves with a JointError") {
  Comm comm;
  const int last = comm.size() - 1;
  auto joint = [&](const std::function<void()>& step) -> JointError {
    try {
      run_together(comm, step);
    } catch (const JointError& e) {
      return e;
    }
    FAIL("run_together did not throw");
    return JointError("");
  };
  // A bad flag found by rank-0-only work (prepare's writer): exit 2 on every rank, rank 0 speaks.
  JointError usage = joint([&] {
    if (comm.rank() == 0) throw UsageError("--out: bad");
  });
  CHECK(usage.code == 2);
  CHECK(std::string(usage.what()) == (comm.rank() == 0 ? "--out: bad" : ""));
  // Not ours: the standard library's, on the last rank only; said as one line by that rank.
  JointError oom = joint([&] {
    if (comm.rank() == last) throw std::bad_alloc();
  });
  CHECK(oom.code == 1);
  CHECK(std::string(oom.what()).find(comm.rank() == last ? "out of memory" : "") == 0);
  JointError other = joint([&] {
    if (comm.rank() == last) (void)std::string("x").at(5);
  });
  if (comm.rank() == last)
    CHECK(std::string(other.what()).find("unexpected failure (basic_string") == 0);
  run_together(comm, [] {});  // nothing thrown: nothing to say
}

TEST_CASE(
    "error feedback's residual is in the values' units, whatever the ranks: what arrives plus it "
    "is what was sent") {
  Comm comm;  // every rank sends the same values, so the ranks' sum adds equal blocks
  const int P = comm.size();
  // Where that sum is exact: int8's at any P; 16-bit sums of thirds round (1/3 is no power of
  // two), and int4 picks a new scale for a sum (its one-rank case is in test_sync).
  std::vector<WireType> formats = {WireType::int8};
  if ((P & (P - 1)) == 0) formats.insert(formats.end(), {WireType::fp16, WireType::bf16});
  const int64_t n = 1000;
  WireOptions opts;
  opts.error_feedback = true;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = 1e-3f * std::sin(float(i));
  for (WireType wire_type : formats) {
    INFO(wire_type_name(wire_type));
    auto wire = make_wire_average(wire_type, comm, n, opts);
    wire->start(v.data(), 0, n);
    const std::vector<float>& got = wire->finish();
    double rounded = 0;
    for (int64_t i = 0; i < n; ++i) {
      INFO(i);
      REQUIRE(got[size_t(i)] + wire->residual()[size_t(i)] == Approx(v[size_t(i)]).margin(1e-9));
      rounded = std::max(rounded, double(std::abs(got[size_t(i)] - v[size_t(i)])));
    }
    CHECK(rounded > 1e-7);  // 16 bits keep ~1e-3 / 256 of these, int8 ~1e-3 / 254
  }
}

TEST_CASE(
    "int8, int4, fp16 and bf16 on the wire: the ranks' mean, to within each block's own scale") {
  Comm comm;
  // Blocks of 256 (int8) or 64 (int4): the last one partial, a range ends mid-block.
  const int64_t n = 1000;
  // top: the steps a block's largest value is cut into (the 16-bit formats' steps are relative:
  // 2^10 and 2^7 of a value, finer than these of its block's largest)
  const auto [wire_type, top] =
      GENERATE(std::make_pair(WireType::int8, 127), std::make_pair(WireType::int4, 7),
               std::make_pair(WireType::fp16, 1024), std::make_pair(WireType::bf16, 128));
  INFO(wire_type_name(wire_type));
  auto wire = make_wire_average(wire_type, comm, n, WireOptions());
  auto value = [](int rank, int64_t i) {
    return float(rank + 1) * std::sin(float(i)) * (i < 256 ? 1e-3f : 1.0f);
  };
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value(comm.rank(), i);
  wire->start(v.data(), 600, n);
  wire->start(v.data(), 0, 600);
  const std::vector<float>& got = wire->finish();
  const int P = comm.size();
  for (int64_t i = 0; i < n; ++i) {
    double mean = 0;
    for (int r = 0; r < P; ++r) mean += value(r, i) / P;
    // The largest |mean| in i's block.
    const double block_top = (i < 256 ? 1e-3 : 1.0) * (P + 1) / 2.0;
    INFO(i);
    // Each rounding: half a step.
    REQUIRE(std::abs(got[size_t(i)] - mean) <= (P + 1) * block_top / top);
  }
}

TEST_CASE(
    "the rounds' allreduce algorithm switches while running, and either gives the mean on every "
    "rank alike") {
  Comm comm;
  auto libnbc_value = [] {  // Open MPI's variable as MPI's tool interface reads it
    int provided, index, count, value = -1;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_cvar_handle handle;
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      MPI_T_cvar_read(handle, &value);
      MPI_T_cvar_handle_free(&handle);
    }
    MPI_T_finalize();
    return value;
  };
  const int64_t n = 3000;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(comm.rank() + 1) * std::sin(float(i));
  for (const auto& [algorithm, number] : {std::make_pair(AllreduceAlgorithm::binomial, 2),
                                          std::make_pair(AllreduceAlgorithm::rabenseifner, 3)}) {
    INFO(allreduce_algorithm_name(algorithm));
    REQUIRE(set_allreduce_algorithm(algorithm));
    CHECK(libnbc_value() == number);
    auto wire = make_wire_average(WireType::int8, comm, n, WireOptions());
    wire->start(v.data(), 0, n);
    const std::vector<float>& got = wire->finish();
    const double mean_factor = (comm.size() + 1) / 2.0;
    for (int64_t i = 0; i < n; ++i)
      REQUIRE(std::abs(got[size_t(i)] - mean_factor * std::sin(float(i))) < 0.02 * mean_factor);
    CHECK(same_on_every_rank(got));
  }
}

// A training slice larger than --data-memory streams from the file: a run stopped after its first
// steps (the stop file asks at step 0; on several ranks the vote is read at step 1) and resumed
// ends with the same weights as the run that was not stopped, on every number of ranks.
TEST_CASE("a streamed slice: a run stopped mid-epoch and resumed trains as one run, bit for bit") {
  test::TempDir dir;
  test::write_synthetic_dataset(dir / "d.h5", 480, 64, 4);
  Comm comm;
  TrainOptions o = test::short_run(dir / "d.h5", "mlp", 2, 16);
  o.data_memory = 80 << 10;  // 60 KB for the training rows: windows of 36 rows
  o.checkpoint = dir / "m.h5";
  std::ostringstream out;
  const auto whole = fit(o, comm, out);
  o.progress_file = dir / "progress";
  if (comm.rank() == 0) std::ofstream(o.progress_file + ".stop") << "stop\n";
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK_THROWS_AS(fit(o, comm, out), Stopped);
  if (comm.rank() == 0) {
    const Checkpoint c = load_checkpoint(o.checkpoint);
    CHECK(c.state.step == (comm.size() == 1 ? 1 : 2));
    CHECK(c.state.epoch == 0);
    std::remove((o.progress_file + ".stop").c_str());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  o.resume = o.checkpoint;
  const auto resumed = fit(o, comm, out);
  CHECK(resumed.params == whole.params);
  if (comm.rank() == 0)  // the banner
    CHECK(out.str().find("data: streamed from the file in windows of 36 rows") !=
          std::string::npos);
}

// Local SGD's ranks meet after every 4th step, where the stop vote rides; a checkpoint every 3
// steps needs no vote and falls due at its own steps all the same.
TEST_CASE("run control: a checkpoint by steps falls due at its steps, between meetings too") {
  test::TempDir dir;
  Comm comm;
  Model model("mlp", 3);
  auto opt = make_optimizer("adam", model.num_params(), 0);
  SyncOptions so;
  so.strategy = "local-sgd", so.sync_every = 4;
  auto sync = make_sync_strategy(comm, model.params().data(), model.num_params(), so);
  TrainOptions o;
  o.checkpoint = dir / "c.h5";
  o.checkpoint_every_steps = 3;
  RunState state;
  RunControl control(o, comm, *sync, model, *opt, state, test::class_names(3));
  for (int64_t step = 0; step < 12; ++step) {
    state.step = step + 1;
    const StepDecision d = control.after_step(step);
    CHECK(d.stop == 0);
    CHECK(d.save == ((step + 1) % 3 == 0));
  }
}
