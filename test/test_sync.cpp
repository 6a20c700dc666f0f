// Wire formats, error feedback and --sync auto's choice (one process; the multi-rank behaviour is
// in test_mpi).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "pitrain/rng.h"
#include "pitrain/sync.h"
#include "pitrain/wire.h"

using namespace pitrain;

TEST_CASE("fp16: exact values, rounding to nearest even, range") {
  for (float v :
       {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f, 0.333251953125f})
    CHECK(half_to_float(float_to_half(v)) == v);
  CHECK(half_to_float(float_to_half(1.0f + 1.0f / 2048)) == 1.0f);  // tie goes to even
  // Tie goes to even.
  CHECK(half_to_float(float_to_half(1.0f + 3.0f / 2048)) == 1.0f + 4.0f / 2048);
  CHECK(std::isinf(half_to_float(float_to_half(65520.0f))));
  CHECK(half_to_float(float_to_half(65519.0f)) == 65504.0f);
  CHECK(half_to_float(float_to_half(1e-9f)) == 0.0f);
  CHECK(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(float_to_half(-0.0f) == 0x8000);
  for (uint64_t i = 0; i < 20000; ++i) {  // normal range: relative error at most 2^-11
    const float v = (uniform01(5, i) - 0.5f) * std::pow(2.0f, float(int(splitmix64(i) % 28) - 13));
    const float back = half_to_float(float_to_half(v));
    INFO(v);
    REQUIRE(std::abs(back - v) <= std::abs(v) * (1.0f / 2048) + 3e-8f);
  }
}

TEST_CASE("bf16: float's range, 8 bits of mantissa") {
  for (float v : {0.0f, 1.0f, -3.0f, 1e30f, 1e-30f})
    CHECK(std::abs(bf16_to_float(float_to_bf16(v)) - v) <= std::abs(v) / 256);
  CHECK(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)) == 1.0f);  // tie goes to even
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("error feedback: what was sent plus what is carried equals the true gradients") {
  Comm comm;  // one rank: the allreduce is the identity, so "sent" is what finish() returns
  const int64_t n = 5000;
  WireOptions opts;
  opts.error_feedback = true;
  opts.matrices = {{100, 40, 50}, {2100, 60, 30}};  // PowerSGD compresses these, sends the rest
  for (WireType wire :
       {WireType::fp16, WireType::bf16, WireType::int8, WireType::int4, WireType::powersgd}) {
    INFO(wire_type_name(wire));
    auto average = make_wire_average(wire, comm, n, opts);
    std::vector<double> truth(size_t(n), 0.0), sent(size_t(n), 0.0);
    for (uint64_t step = 0; step < 5; ++step) {
      std::vector<float> g(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) g[size_t(i)] = (uniform01(step, uint64_t(i)) - 0.5f) * 1e-3f;
      for (int64_t i = 0; i < n; ++i) truth[size_t(i)] += g[size_t(i)];
      average->start(g.data(), 0, n);
      const std::vector<float>& got = average->finish();
      for (int64_t i = 0; i < n; ++i) sent[size_t(i)] += got[size_t(i)];
      // Nothing carried yet: what went is the values, rounded.
      if (step == 0 && wire != WireType::powersgd) {
        // int4's bound is wider: its scale may coarsen.
        const double bound = wire == WireType::fp16   ? 5e-4 / 1024
                             : wire == WireType::bf16 ? 5e-4 / 128
                             : wire == WireType::int8 ? 5e-4 / 127
                                                      : 2 * 5e-4 / 7;
        for (int64_t i = 0; i < n; ++i) REQUIRE(std::abs(got[size_t(i)] - g[size_t(i)]) <= bound);
      }
      double worst = 0;
      for (int64_t i = 0; i < n; ++i)
        worst = std::max(
            worst, std::abs(sent[size_t(i)] + average->residual()[size_t(i)] - truth[size_t(i)]));
      CHECK(worst < 1e-9);  // float rounding of the running sums only; one 16-bit step is ~1e-6
    }
  }
}

TEST_CASE("a NaN or an infinity makes its block NaN on the wire, and the sum says so") {
  Comm comm;              // one rank
  const int64_t n = 600;  // blocks [0, 256), [256, 512), [512, 600)
  WireOptions opts;
  opts.error_feedback = true;
  // PowerSGD: a weight in the first block; its rest rides in int4 blocks.
  opts.matrices = {{0, 20, 10}};
  const float bad =
      GENERATE(std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity());
  for (WireType wire : {WireType::int8, WireType::int4, WireType::powersgd}) {
    INFO(wire_type_name(wire) << " " << bad);
    auto average = make_wire_average(wire, comm, n, opts);
    std::vector<float> v(static_cast<size_t>(n), 0.25f);
    // A whole block: no finite scale fits it, and int4 must still find the others'.
    for (int64_t i = 256; i < 512; ++i) v[size_t(i)] = bad;
    v[520] = -bad;
    average->start(v.data(), 0, n);
    const std::vector<float>& got = average->finish();
    for (int64_t i = 256; i < n; ++i) {
      INFO(i);
      REQUIRE(std::isnan(got[size_t(i)]));
    }
    // The other blocks as ever, except with PowerSGD: its factors mix every row of the weight
    // into its rest.
    if (wire != WireType::powersgd)
      for (int64_t i = 0; i < 256; ++i) REQUIRE(std::isfinite(got[size_t(i)]));
  }
}

TEST_CASE(
    "int4 on the wire: levels in a prefix code, 120 bytes a block of 256, coarser only where the "
    "code would not fit") {
  Comm comm;  // one rank: the sum is this rank's blocks as they travel
  CHECK(int4_wire_bytes(64) == 120);
  CHECK(int4_wire_bytes(256) == 120);
  CHECK(int4_wire_bytes(257) == 240);
  const int64_t n = 512;
  std::vector<float> v(static_cast<size_t>(n), 0.0f), dropped(v.size()), got(v.size());
  // Block 0: every level -7..7 once at a scale of 0.25 (a bfloat16), the rest 0: 162 + 3 x 128
  // bits of code, which fit in 896, so every value arrives exactly.
  for (int i = 0; i < 15; ++i) v[size_t(i)] = 0.25f * float(i - 7);
  // Block 1: 256 values of one size: level 7 each, 5 bits, 1,280 in all. The scale of the 64
  // whose code is longest grows, the first of equals, until all fit: two 64s at level +-3 (4
  // bits, a step of 0.87), two at +-1 (3 bits, 0.70).
  for (int64_t i = 256; i < n; ++i) v[size_t(i)] = i % 3 ? 1.0f : -1.0f;
  auto sum = make_int4_sum(n);
  MPI_Request request = sum->start(comm, v.data(), n, dropped.data());
  comm.wait(request);
  sum->read(got.data(), n);
  for (int64_t i = 0; i < 256; ++i) {
    INFO(i);
    CHECK(got[size_t(i)] == v[size_t(i)]);
    CHECK(dropped[size_t(i)] == 0.0f);
  }
  int ones = 0;
  for (int64_t start = 256; start < n; start += 64) {
    const float step = std::abs(got[size_t(start)]);  // this 64's level times its scale
    CHECK(step > 0.5f);
    CHECK(step < 1.0f);
    ones += step < 0.8f;
    for (int64_t i = start; i < start + 64; ++i) {
      INFO(i);
      CHECK(got[size_t(i)] == std::copysign(step, v[size_t(i)]));
      // For error feedback.
      CHECK(got[size_t(i)] + dropped[size_t(i)] == Approx(v[size_t(i)]).margin(1e-7));
    }
  }
  CHECK(ones == 2);
}

namespace {

// A weight of rank 3 (a sum of three outer products) at v[at, at + rows * cols).
void put_rank3_weight(std::vector<float>& v, int64_t at, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      v[size_t(at + i * cols + j)] =
          std::cos(float(i)) * float(j) + float(i % 7) * std::sin(float(j)) - 0.01f * float(i * i);
}

// sqrt(sum (got - want)^2 / sum want^2) over [lo, hi).
double relative_error(const std::vector<float>& got, const std::vector<float>& want, int64_t lo,
                      int64_t hi) {
  double error = 0, norm = 0;
  for (int64_t i = lo; i < hi; ++i) {
    const double d = got[size_t(i)] - want[size_t(i)];
    error += d * d, norm += double(want[size_t(i)]) * want[size_t(i)];
  }
  return std::sqrt(error / norm);
}

}  // namespace

TEST_CASE(
    "PowerSGD: a weight of rank r or less arrives whole in one round, the rest as it is, in int4") {
  Comm comm;
  const int64_t n = 3000, rows = 40, cols = 50, at = 700;
  WireOptions opts;
  opts.low_rank = 4;
  // The second is too small to gain: sent whole.
  opts.matrices = {{at, rows, cols}, {2900, 10, 10}};
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = std::sin(float(i));
  put_rank3_weight(v, at, rows, cols);
  auto average = make_wire_average(WireType::powersgd, comm, n, opts);
  CHECK(average->whole_vector());
  average->start(v.data(), 0, n);
  const std::vector<float>& got = average->finish();
  for (int64_t i = 0; i < n; ++i) {
    INFO(i);
    const double want = v[size_t(i)];
    if (i < at || i >= at + rows * cols) {
      // |sin| <= 1 in a block: rounded to a step of 1/7, or, where its many large levels would
      // not fit int4's code, a coarser one (measured: up to 2.9/7); what rounding took waits in
      // the residual.
      REQUIRE(std::abs(got[size_t(i)] - want) <= 0.5 * 3 / 7);
      REQUIRE(got[size_t(i)] + average->residual()[size_t(i)] == Approx(want).margin(1e-6));
    }
  }
  // int4 factors keep ~1/14 of a column block's largest value, in P and in Q: measured 0.107.
  // A factor that missed a direction of the weight would be off by about the weight itself (1).
  CHECK(relative_error(got, v, at, at + rows * cols) < 0.15);
  // P (40 x 4) and Q (50 x 4) a block of 64 a column; the rest before the weight (700 values)
  // and after it (300) from blocks of their own.
  CHECK(wire_bytes(WireType::powersgd, n, opts) ==
        int4_wire_bytes(4 * 64 + 704 + 320) + int4_wire_bytes(4 * 64));
}

TEST_CASE("PowerSGD: a round of zeros does not silence a weight for the rounds after") {
  // A round with nothing learnt (a resume at an epoch's end, before any step) gave Q = M^T P = 0,
  // which warm-started every later round at zero: the weight never travelled again.
  Comm comm;
  const int64_t n = 2000, rows = 40, cols = 50;
  WireOptions opts;
  opts.low_rank = 4;
  opts.matrices = {{0, rows, cols}};
  auto average = make_wire_average(WireType::powersgd, comm, n, opts);
  std::vector<float> v(static_cast<size_t>(n), 0.0f);
  average->start(v.data(), 0, n);
  average->finish();
  put_rank3_weight(v, 0, rows, cols);
  average->start(v.data(), 0, n);
  CHECK(relative_error(average->finish(), v, 0, rows * cols) < 0.15);
}

TEST_CASE(
    "a model's kernels as PowerSGD's 2-D weights: where each is in the buffer, (fan-in, units)") {
  // cnn, 15 classes: conv 3x3x1 -> 32 (+32 biases), conv 3x3x32 -> 64 (+64), dense 1600 -> 15
  const auto m = weight_matrices(Model("cnn", 15));
  REQUIRE(m.size() == 3);
  const int64_t want[3][3] = {{0, 9, 32}, {320, 288, 64}, {18816, 1600, 15}};
  for (int i = 0; i < 3; ++i) {
    INFO(i);
    CHECK(m[size_t(i)].offset == want[i][0]);
    CHECK(m[size_t(i)].rows == want[i][1]);
    CHECK(m[size_t(i)].cols == want[i][2]);
  }
}

TEST_CASE("--sync auto: fp32 every step on a fast link; rarer and smaller rounds as it slows") {
  const int64_t n = 204815;  // the magazine's mlp with 15 classes: 784x256 and 256x15 kernels
  const std::vector<WireMatrix> kernels = {{0, 784, 256}, {784 * 256 + 256, 256, 15}};
  auto choose = [&](double mbit, double latency, double step) {
    return choose_sync(SyncOptions{}, step, LinkTiming{latency, 8 / (mbit * 1e6)}, n, kernels);
  };
  const SyncChoice fast = choose(10000, 50e-6, 0.005);  // 0.7 ms for 819 KB against a 5 ms step
  CHECK(fast.opts.sync_every == 1);
  CHECK(fast.opts.wire == WireType::fp32);
  CHECK_FALSE(fast.opts.overlap);
  const SyncChoice gigabit = choose(1000, 100e-6, 0.020);  // fp32 6.6 ms, bf16 3.4 ms: under 4 ms
  CHECK(gigabit.opts.sync_every == 1);
  CHECK(gigabit.opts.wire == WireType::bf16);
  CHECK(gigabit.opts.error_feedback);
  CHECK(gigabit.opts.outer_lr == 1.0f);
  // WLAN and a 1 ms step: int4 takes 48 ms a round (a blocking round every 8 steps may take
  // 5.3), bf16 and int8 80-170 ms; PowerSGD's 10 KB (rank 16 in int4: each column of the
  // 784x256 kernel's factors in whole blocks of 64, the 256x15 kernel whole) 8.04 ms, which 9
  // steps hide (8 would not): rounds every 18 steps, each applied 9 steps after it starts.
  const SyncChoice wlan = choose(20, 2e-3, 0.001);
  CHECK(wlan.opts.wire == WireType::powersgd);
  CHECK(wlan.opts.sync_every == 18);
  CHECK(wlan.opts.overlap);
  CHECK(wlan.opts.overlap_steps == 9);
  CHECK(wlan.opts.outer_lr == 0.35f);
  CHECK(wlan.opts.outer_momentum == 0.8f);
  CHECK(wlan.opts.inner_lr_scale == 1.0f);
  CHECK(wlan.why.find("rounds every 18 steps, overlapped and applied 9 steps later, in powersgd "
                      "rank 16 (10 KB") == 0);
  CHECK_FALSE(wlan.opts.max_sync_every);  // PowerSGD's K stays
  // 60 Mbit/s (the emulated 100 Mbit/s hosts as the probe sees them) and a 0.67 ms step:
  // PowerSGD's 2.1 ms would hide behind 4 steps, but its rounds come every 16 steps at the
  // least, applied 8 steps on.
  const SyncChoice ethernet = choose(60, 0.2e-3, 0.00067);
  CHECK(ethernet.opts.wire == WireType::powersgd);
  CHECK(ethernet.opts.sync_every == 16);
  CHECK(ethernet.opts.overlap_steps == 8);
  CHECK(ethernet.opts.outer_lr == 0.35f);
  // The emulated 100 Mbit/s hosts on a slower hour (0.11 ms an allreduce, 6.6 MB/s) and 0.79 ms
  // steps: int4 every 16 steps applied 8 on (96 KB, 15 ms) would keep the ranks waiting 8.7 ms
  // of 21, over a fifth, so PowerSGD's 10 KB every 18 steps, which 9 steps hide.
  const SyncChoice ethernet_slow = choose(6.6 * 8, 0.11e-3, 0.00079);
  INFO(ethernet_slow.why);
  CHECK(ethernet_slow.opts.wire == WireType::powersgd);
  CHECK(ethernet_slow.opts.overlap_steps == ethernet_slow.opts.sync_every / 2);
  // WLAN and a 0.6 ms step: the 8.04 ms round needs 14 steps, so rounds every 28, applied 14
  // on; from K = 24 the outer step is 0.5/0.8, the ranks' own lr still the full one.
  const SyncChoice wlan_fast = choose(20, 2e-3, 0.0006);
  INFO(wlan_fast.why);
  CHECK(wlan_fast.opts.sync_every == 28);
  CHECK(wlan_fast.opts.overlap_steps == 14);
  CHECK(wlan_fast.opts.outer_lr == 0.5f);
  CHECK(wlan_fast.opts.outer_momentum == 0.8f);
  CHECK(wlan_fast.opts.inner_lr_scale == 1.0f);
  // 10 ms an allreduce (a WLAN with latency, as the probe sees it): a round needs over 24 steps,
  // so it is applied at the next round, every K >= its steps rather than 2K.
  const SyncChoice far = choose(20, 10e-3, 0.001);
  INFO(far.why);
  CHECK(far.opts.wire == WireType::powersgd);
  CHECK(far.opts.overlap_steps == 0);
  CHECK(far.opts.sync_every > 24);
  CHECK(far.opts.sync_every < 96);
  // A WLAN cell (the emulated one's probe: 0.2 MB/s, every frame through one shared bucket
  // twice) and a 0.55 ms step: a round of ~70 ms hides behind no 64 steps, so it is applied at
  // the next round.
  const SyncChoice cell = choose(1.6, 2e-3, 0.00055);
  INFO(cell.why);
  CHECK(cell.opts.wire == WireType::powersgd);
  CHECK(cell.opts.sync_every > 64);
  CHECK(cell.opts.overlap_steps == 0);
  // Rounds that far apart: the ranks' own steps shorter, the outer step larger.
  CHECK(cell.opts.inner_lr_scale == 0.7f);
  CHECK(cell.opts.outer_lr == 0.5f);
  CHECK(cell.opts.outer_momentum == 0.8f);
  CHECK(cell.why.find("outer Nesterov 0.5/0.8, inner lr 0.7x against") != std::string::npos);
  const SyncChoice hopeless = choose(0.1, 0.1, 0.001);
  CHECK(hopeless.opts.sync_every == 128);
  CHECK(hopeless.why.find("still too slow a link") != std::string::npos);
  CHECK_FALSE(fast.opts.max_sync_every);
}

TEST_CASE(
    "--sync auto: int4 rounds every 8 steps, applied 2 or 4 steps on where those hide them, else "
    "blocking while they cost two fifths at most, then overlapped ones") {
  // The cnn (42,831 parameters) on the emulated wlan: int4's 20 KB take 13.7 ms a round, int8's
  // 44 KB 29 ms.
  const int64_t n = 42831;
  const std::vector<WireMatrix> kernels = {{0, 9, 32}, {320, 288, 64}, {18816, 1600, 15}};
  auto choose = [&](double step) {
    return choose_sync(SyncOptions{}, step, LinkTiming{0.25e-3, 1 / 1.5e6}, n, kernels);
  };
  for (double step : {0.010, 0.040}) {  // 2 steps hide the round
    const SyncChoice soon = choose(step);
    CHECK(soon.opts.wire == WireType::int4);
    CHECK(soon.opts.sync_every == 8);
    CHECK(soon.opts.overlap);
    CHECK(soon.opts.overlap_steps == 2);
    CHECK(soon.opts.error_feedback);
    // A round that waits for a host still busy with its step, or that costs the CPU, costs
    // more than the probe measured: K may double.
    CHECK(soon.opts.max_sync_every == 128);
    CHECK(soon.opts.outer_lr == 0.35f);  // every round auto takes moves by the outer step
    CHECK(soon.opts.outer_momentum == 0.8f);
    CHECK(soon.why.find("rounds every 8 steps, overlapped and applied 2 steps later, in int4") ==
          0);
  }
  const SyncChoice later = choose(0.005);  // 2 steps of 5 ms hide 10 ms, 4 steps 20
  CHECK(later.opts.wire == WireType::int4);
  CHECK(later.opts.sync_every == 8);
  CHECK(later.opts.overlap);
  CHECK(later.opts.overlap_steps == 4);
  CHECK(later.why.find("rounds every 8 steps, overlapped and applied 4 steps later, in int4") == 0);
  // 13.7 ms after 8 steps of 3 ms: 36 % waiting; 4 steps hide 12.
  const SyncChoice blocking = choose(0.003);
  CHECK(blocking.opts.wire == WireType::int4);
  CHECK(blocking.opts.sync_every == 8);
  CHECK_FALSE(blocking.opts.overlap);
  CHECK(blocking.opts.overlap_steps == 0);
  CHECK(blocking.opts.max_sync_every == 0);  // the probe measured its cost: K stays
  CHECK(blocking.why.find("rounds every 8 steps, blocking in int4") == 0);
  // After 8 steps of 2.5 ms: 41 %; 8 overlapped steps hide neither format (int8's 29 ms), but
  // they hide int4's 13.7 ms of a round every 16 steps.
  const SyncChoice every16 = choose(0.0025);
  CHECK(every16.opts.wire == WireType::int4);
  CHECK(every16.opts.sync_every == 16);
  CHECK(every16.opts.overlap_steps == 8);
  CHECK(every16.opts.max_sync_every == 128);
  // The emulated WLAN cell as its probe sees it (0.12 ms an allreduce, 0.2 MB/s) and 9 ms steps:
  // int4's 101 ms outlast the 8 steps before it is applied by 29 ms, under a fifth of the 173 ms
  // from one round to the next; int8 every 32 steps (219 ms) would hide but learns less.
  const SyncChoice cell =
      choose_sync(SyncOptions{}, 0.009, LinkTiming{0.12e-3, 1 / 0.2e6}, n, kernels);
  INFO(cell.why);
  CHECK(cell.opts.wire == WireType::int4);
  CHECK(cell.opts.sync_every == 16);
  CHECK(cell.opts.overlap_steps == 8);
  CHECK(cell.why.find("rounds every 16 steps, overlapped and applied 8 steps later, in int4") == 0);
  // With 8 ms steps the wait (37 ms of 165) passes a fifth: int8 every 32 steps, which hide it.
  const SyncChoice cell_fast =
      choose_sync(SyncOptions{}, 0.008, LinkTiming{0.12e-3, 1 / 0.2e6}, n, kernels);
  INFO(cell_fast.why);
  CHECK(cell_fast.opts.sync_every == 32);
  CHECK(cell_fast.opts.overlap_steps == 0);
  // 20 ms an allreduce whatever its bytes, and 1 ms steps: int4 every 16 would keep the ranks
  // waiting 12 ms of 28, over a fifth; bf16 every 32 steps hides.
  const SyncChoice far = choose_sync(SyncOptions{}, 0.001, LinkTiming{20e-3, 1e-9}, n, kernels);
  INFO(far.why);
  CHECK(far.opts.wire == WireType::bf16);
  CHECK(far.opts.sync_every == 32);
  CHECK(far.opts.overlap_steps == 0);
  CHECK(far.opts.outer_lr == 0.5f);  // from K = 24
  CHECK(far.opts.outer_momentum == 0.8f);
  // A link whose fixed cost outweighs its bytes (6 ms an allreduce, 1 GB/s) and steps of 1 ms: a
  // blocking round may take 5.3 ms, 8 overlapped steps hide 8, and bf16 comes before int8.
  const SyncChoice latency_bound =
      choose_sync(SyncOptions{}, 0.001, LinkTiming{6e-3, 1e-9}, n, kernels);
  CHECK(latency_bound.opts.wire == WireType::bf16);
  CHECK(latency_bound.opts.sync_every == 8);
  CHECK(latency_bound.opts.overlap);
  CHECK(latency_bound.opts.max_sync_every == 128);  // and may double during the run
}

TEST_CASE("RoundPace: K grows after two slow votes in a row, skips the vote of the old K") {
  // Per mille of the time between rounds spent in their work: slow is over 150. A cost c at K
  // is c / (c + (1 - c) g) at g K: 250 is 143 at twice K, 400 is 143 at four times K.
  const int slow = 400, fast = 100, just_slow = 250;
  RoundPace pace(2, 0, 16);
  CHECK(pace.adapts());
  CHECK_FALSE(pace.update(slow));
  CHECK_FALSE(pace.update(fast));  // not in a row
  CHECK_FALSE(pace.update(just_slow));
  CHECK_FALSE(pace.update(kNotTimed));  // a round cut short: counts neither way
  CHECK(pace.update(slow));             // the smaller of the two: 250
  CHECK(pace.every() == 4);
  CHECK_FALSE(pace.update(slow));            // told of a round of K = 2
  CHECK_FALSE(pace.update(kSlowRoundCost));  // not over it
  CHECK_FALSE(pace.update(slow));
  CHECK(pace.update(slow));
  CHECK(pace.every() == 16);  // 400: four times K
  CHECK_FALSE(pace.adapts());
  for (int i = 0; i < 4; ++i) CHECK_FALSE(pace.update(1000));
  CHECK(pace.every() == 16);
  RoundPace capped(3, 0, 8);  // never past the maximum
  capped.update(1000);
  capped.update(1000);
  CHECK(capped.every() == 8);
  RoundPace fixed(4, 2, 0);  // max_sync_every 0: K and the delay stay
  CHECK_FALSE(fixed.adapts());
  CHECK_FALSE(fixed.update(slow));
  CHECK_FALSE(fixed.update(slow));
  CHECK(fixed.every() == 4);
  CHECK(fixed.delay() == 2);
}

TEST_CASE("RoundPace: rounds applied a few steps on go to the next round before K grows") {
  RoundPace pace(8, 2, 32);
  CHECK_FALSE(pace.update(1000));
  CHECK_FALSE(pace.update(1000));
  CHECK(pace.delay() == 0);
  CHECK(pace.every() == 8);
  CHECK_FALSE(pace.update(1000));  // told of the old pace
  CHECK_FALSE(pace.update(1000));
  CHECK(pace.update(1000));
  CHECK(pace.every() == 32);
}

TEST_CASE(
    "int8 and int4: ranges shorter than a block, one after another, are refused before they "
    "overflow the blocks") {
  Comm comm;
  const int64_t n = 1000;  // room for 8 blocks of 256 values: ten ranges of 100 would need 10
  const std::vector<float> v(size_t(n), 1.0f);
  for (WireType wire : {WireType::int8, WireType::int4}) {
    INFO(wire_type_name(wire));
    auto average = make_wire_average(wire, comm, n, WireOptions());
    int started = 0;
    CHECK_THROWS_WITH(
        [&] {
          for (int64_t lo = 0; lo < n; lo += 100, ++started) average->start(v.data(), lo, lo + 100);
        }(),
        Catch::Contains("need more blocks"));
    CHECK(started == 8);
  }
}
