// --sync auto: time the link and a step at start-up, then pick the schedule and wire format
// that keep communication a small share of the time (choose_sync in sync.h says how small).
// Per-step fp32 where the link allows it (the exact data-parallel step), and only as much
// compression and as rare rounds as needed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "pitrain/sync.h"

namespace pitrain {
namespace {

constexpr double kCommShare = 0.2;     // of the step: the budget of an allreduce every step
constexpr double kOverlapShare = 1.0;  // of K steps: the longest round that hides behind them
// A WLAN cell carries a PowerSGD round of mlp (13 KB) in ~70 ms, 128 of its 0.55 ms steps: at
// rank 8, 4 ranks reached 0.78 in 24 epochs of 3,200 images with rounds every 128 steps, where
// rounds every 64 that the cell could not carry behind the steps took longer (bench/RESULTS.md,
// thirteenth pass).
constexpr int kMaxEvery = 128;
constexpr int kMinLowRankEvery = 16, kMaxHalfDelayEvery = 48;  // PowerSGD's K: choose_sync says why
constexpr int kMaxFullRankEvery = 32;
// PowerSGD rounds move the anchor by an outer Nesterov step (DiLoCo's): a small lr and high
// momentum average the compressed rounds' noise over several rounds and still step ~1.75x their
// mean change. mlp, 4 ranks, epochs of 3,200 images to 0.78 over seeds 0-5: 0.35/0.8 took 11.0
// at K = 8, 11.7 at 16 and 22.0 at 128, against 11.7, 13.5 and 24.0 with 0.5/0.5 (which beat
// the plain mean); 0.5/0.8 and 0.7/0.7 were worse than 0.5/0.5 (bench/RESULTS.md, fourteenth
// pass). An outer lr of 1 with momentum 0.8 diverged.
constexpr float kRoundOuterLr = 0.35f, kRoundOuterMomentum = 0.8f;
constexpr int64_t kProbeBytes = 64 * 1024;
// A round every 8 steps that blocks leaves the ranks apart for 8 steps at most, as overlapped
// rounds every 4 do (each applied a round late), and learnt as much or more: cnn, 4 ranks, at
// the 2nd validation 0.814 / 0.817 / 0.811 (seeds 0-2) in int4 and 0.816 / 0.817 / 0.805 in
// int8 against 0.809 / 0.810 / 0.799 overlapped in int8; at the full budget 0.8815 in int4,
// 0.8785 per-step. So blocking rounds go in int4, the fewest bytes.
// Better still, an int4 round every 8 steps applied 2 steps after it started, where those steps
// hide it: the rank trains on meanwhile, and learnt almost as much (0.813 / 0.812 / 0.802; 1
// step: 0.815 / 0.816 / 0.805; 4: 0.804 / 0.806 / 0.791; 8, a round late: 0.788 / 0.793 /
// 0.780). Not 1 step: a round's allreduce phases (six by the ring then, four now) each move on
// only in an MPI call after their data arrived, and a step makes about four (after each
// weighted layer's backward, after the update), so one step rarely carries a round whatever
// the link (on the emulated 100 Mbit/s hosts 1 and 2 steps measured alike; bench/RESULTS.md,
// eleventh pass).
constexpr int kOverlapSteps = 2;
// MPI moves an overlapped round only inside its calls, a few a step, so on the emulated hosts
// at 100 Mbit/s rounds every 4 steps overlapped cost more than blocking ones every 8 (12-14
// against 10-11 ms a step; bench/RESULTS.md, eighth pass). A blocking round is taken while it
// keeps the ranks waiting no longer than an overlapped round may before K doubles (RoundPace:
// two fifths).
constexpr int kBlockingEvery = 2 * kFreeEvery;
constexpr double kBlockingShare = kSlowRoundWaitPastFree / 1000.0;
// Where no round every 8 steps fits (a WLAN cell), an int4 round every 16 steps applied 8
// steps on, even if the ranks then wait for the rest of it as they would for a blocking round:
// cnn, 4 ranks, at the 2nd validation 0.802 / 0.801 / 0.793 (seeds 0-2) against 0.780 / 0.781
// / 0.771 with the int8 rounds every 32 steps that hide in the cell; on the emulated cell 0.80
// at the 2nd validation instead of the 3rd, at 12.6 ms a step against 10.7 (bench/RESULTS.md,
// eighteenth pass).
constexpr int kWaitingEvery = 2 * kBlockingEvery;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string kb(int64_t bytes) { return fmt("%.0f KB", double(bytes) / 1e3); }
std::string ms(double seconds) { return fmt(seconds < 0.01 ? "%.2f ms" : "%.0f ms", seconds * 1e3); }

// Median seconds of `reps` calls, after one to warm up (the connections are made already:
// Comm::connect_all).
double median_seconds(int reps, const std::function<void()>& call) {
  std::vector<double> t;
  for (int i = 0; i <= reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    if (i > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[size_t(reps / 2)];
}

// The link's fixed cost: a blocking allreduce of one number. Not the rounds' nonblocking one,
// which takes one float on four ranks through the ring's six phases (Open MPI's fallback for
// so few values), each waiting for any host that its CPU quota holds back: 0.3-9.6 ms
// on the emulated hosts against 0.2-0.3 ms.
double time_latency(Comm& comm) {
  return median_seconds(5, [&] {
    double one = 1;
    comm.allreduce_sum(&one, 1);
  });
}

// A round's cost a byte: nonblocking allreduces of kProbeBytes, as the rounds travel. The
// median of seven: of three it once read 6.6 ms on the emulated 100 Mbit/s hosts, where the
// probe took 2.0-2.5 ms in other runs, and chose rounds every 36 steps instead of 16.
double time_probe(Comm& comm) {
  std::vector<float> send(kProbeBytes / sizeof(float), 1.0f), recv(send.size());
  return median_seconds(7, [&] {
    MPI_Request req;
    comm.start_allreduce(send.data(), recv.data(), int(send.size()), MPI_FLOAT, MPI_SUM, &req);
    comm.wait(req);
  });
}

}  // namespace

SyncChoice choose_sync(const SyncOptions& given, double step_seconds, const LinkTiming& link, int64_t n_params,
                       const std::vector<WireMatrix>& matrices) {
  struct Candidate {
    int every;
    WireType wire;
    bool overlap;
    int overlap_steps = 0;  // overlapped: applied this many steps after it started; 0: at the next round
    bool waits = false;     // applied overlap_steps on even if it outlasts them: the ranks wait for the rest
  };
  // bf16 and int8 keep nearly all of a round, PowerSGD's low rank drops much: after the per-step
  // formats and int4 rounds every 8 steps (applied 2 steps on, else blocking), full-rank
  // overlapped rounds up to K = kMaxFullRankEvery come first (measured for cnn on wlan, K = 8:
  // 0.80 accuracy two epochs sooner in int8 than in PowerSGD), then PowerSGD up to kMaxEvery.
  // Overlapped bf16 and int8 start at the blocking round's K: a round that 4 overlapped steps
  // would hide (no longer than them), a blocking round every 8 affords (it may take 16/3 steps).
  // Then int4 every 16 applied 8 on, which may wait (kWaitingEvery): with half int8's bytes and
  // that leave, it fits wherever bf16 or int8 every 16 would, so those are not tried.
  std::vector<Candidate> candidates = {{1, WireType::fp32, false},
                                       {1, WireType::bf16, false},
                                       {kBlockingEvery, WireType::int4, true, kOverlapSteps},
                                       {kBlockingEvery, WireType::int4, false},
                                       {kBlockingEvery, WireType::bf16, true},
                                       {kBlockingEvery, WireType::int8, true},
                                       {kWaitingEvery, WireType::int4, true, kWaitingEvery / 2, true},
                                       {kMaxFullRankEvery, WireType::bf16, true},
                                       {kMaxFullRankEvery, WireType::int8, true}};
  // PowerSGD's K stays as chosen, so it is the smallest that hides the round, not a power of two.
  // First rounds applied K/2 steps after they start, from K = 16: the ranks then drift apart for
  // 1.5 K steps instead of 2 K, and mlp on 4 ranks reached 0.78 in 10.3 epochs with K = 16 (11.7
  // applied a round later), 13.2 with K = 32 (13.8); with the rounds' cost halved, K = 16 took
  // the emulated 100 Mbit/s hosts to 0.78 sooner than K = 8, and K = 32 the 20 Mbit/s ones
  // sooner than K = 17 applied a round later (bench/RESULTS.md, fourteenth pass). A round costs
  // a rank more than the link's time (its compression, two allreduces one after the other, on
  // the emulated hosts each phase's wait for a host its CPU quota holds back). Up to K = 48:
  // a round that needs more than 24 steps is applied at the next round, whose K is half as large
  // (K = 64 applied 32 on took 17.2 epochs, K = 32 applied at the next round 13.8), as are the
  // WLAN cell's (at K = 128, applied 64 on: 22.7 epochs against 22.0).
  for (int every = kMinLowRankEvery; every <= kMaxHalfDelayEvery; every += 2)
    candidates.push_back({every, WireType::powersgd, true, every / 2});
  for (int every = kMinLowRankEvery; every <= kMaxEvery; ++every) candidates.push_back({every, WireType::powersgd, true});
  auto round = [&](const Candidate& c, int64_t* bytes) {  // seconds an average takes
    *bytes = wire_bytes(c.wire, n_params, WireOptions{true, given.powersgd_rank, matrices});
    return link.allreduce_seconds(*bytes, c.wire == WireType::powersgd ? 2 : 1);
  };
  // Every step, the allreduce waits in full; so does a blocking round, once every K steps; a
  // round overlapped with K steps (or with the steps until it is applied) costs only what
  // outlasts them, and may not outlast them unless it waits, as much as a blocking round may.
  auto fits = [&](const Candidate& c) {
    int64_t bytes;
    const double t = round(c, &bytes);
    const double wait = c.overlap ? std::max(0.0, t - c.overlap_steps * step_seconds) : t;
    if (c.every == 1) return t <= kCommShare * step_seconds;
    if (!c.overlap || c.waits) return wait <= kBlockingShare * (c.every * step_seconds + wait);
    return t <= kOverlapShare * (c.overlap_steps ? c.overlap_steps : c.every) * step_seconds;
  };
  const auto it = std::find_if(candidates.begin(), candidates.end(), fits);
  const Candidate pick = it != candidates.end() ? *it : candidates.back();
  int64_t bytes = 0, fp32_bytes = 0;
  const double t = round(pick, &bytes), fp32 = round(candidates.front(), &fp32_bytes);
  SyncChoice choice{given, ""};
  choice.opts.sync_every = pick.every;
  choice.opts.wire = pick.wire;
  choice.opts.error_feedback = pick.wire != WireType::fp32;
  choice.opts.overlap = pick.overlap;
  choice.opts.overlap_steps = pick.overlap_steps;
  // Overlapped bf16 and int8 rounds may grow to kMaxFullRankEvery during the run (cnn's final
  // accuracy with int8 at K = 8, 16 and 32 was within 0.5 points of per-step sync); PowerSGD's K
  // stays: with its low rank, mlp learnt less a step as K doubled. A blocking round's cost, and
  // that of one applied 2 steps on, is what the probe measured, so their K stays too.
  const bool doubles = pick.overlap && !pick.overlap_steps && pick.wire != WireType::powersgd;
  choice.opts.max_sync_every = doubles ? kMaxFullRankEvery : 0;
  if (pick.wire == WireType::powersgd)
    choice.opts.outer_lr = kRoundOuterLr, choice.opts.outer_momentum = kRoundOuterMomentum;
  const std::string what =
      (pick.every == 1 ? std::string("gradients every step")
                       : "rounds every " + std::to_string(pick.every) + " steps, " +
                             (pick.overlap_steps ? "overlapped and applied " + std::to_string(pick.overlap_steps) + " steps later,"
                              : pick.overlap            ? "overlapped"
                                                        : "blocking")) +
      " in " + wire_type_name(pick.wire) + (pick.wire == WireType::powersgd ? " rank " + std::to_string(given.powersgd_rank) : "") +
      " (" + kb(bytes) + " an average, " + ms(t) + ")" +
      (choice.opts.outer_momentum > 0 ? ", outer Nesterov " + fmt("%g", choice.opts.outer_lr) + "/" + fmt("%g", choice.opts.outer_momentum) : "");
  const std::string against = pick.every == 1 ? "a " + ms(step_seconds) + " step" : std::to_string(pick.every) + " steps of " + ms(step_seconds);
  choice.why = what + " against " + against + (it == candidates.end() ? ": the most frugal choice, and still too slow a link for this model" : "") +
               (pick.every == 1 && pick.wire == WireType::fp32 ? "" : "; fp32 every step would take " + ms(fp32) + " a step") +
               " (link: " + ms(link.latency) + " an allreduce, " + fmt("%.1f", 1e-6 / std::max(link.seconds_per_byte, 1e-12)) + " MB/s)" +
               (choice.opts.max_sync_every > pick.every ? "; K doubles (up to " + std::to_string(kMaxFullRankEvery) + ") while the rounds keep a rank waiting" : "");
  return choice;
}

SyncChoice auto_sync(Comm& comm, const SyncOptions& given, double step_seconds, int64_t n_params,
                     const std::vector<WireMatrix>& matrices) {
  double slowest[3] = {time_latency(comm), time_probe(comm), step_seconds};
  MPI_Allreduce(MPI_IN_PLACE, slowest, 3, MPI_DOUBLE, MPI_MAX, comm.raw());
  LinkTiming link{slowest[0], std::max(slowest[1] - slowest[0], 0.0) / double(kProbeBytes)};
  return choose_sync(given, slowest[2], link, n_params, matrices);
}

}  // namespace pitrain
