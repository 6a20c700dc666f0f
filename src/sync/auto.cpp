// --sync auto: time the link and a step at start-up, then take the first schedule and wire
// format, in order of preference, whose communication fits: per-step fp32 where the link allows
// it (the exact data-parallel step), and only as much compression and as rare rounds as needed.
// The constants are tuned on emulated hosts with bench/cluster.sh (time to a target) and
// bench/sync_accuracy.sh (final accuracy): bench/RESULTS.md, "Cluster: one host against four,
// `--sync auto`" and "Final accuracy of the rounds `--sync auto` takes".
#include <algorithm>
#include <cmath>
#include <functional>

#include "pitrain/clock.h"
#include "pitrain/sync.h"
#include "pitrain/text.h"

namespace pitrain {
namespace {

// An allreduce every step may cost the step a fifth; an overlapped round may take as long as
// the steps it hides behind.
constexpr double kCommShare = 0.2;
constexpr double kOverlapShare = 1.0;
// Rounds every 8 steps that block may keep the ranks waiting two fifths of the time, in int4,
// the fewest bytes: `cnn` learns as much as with int8 or with overlapped rounds every 4.
constexpr int kBlockingEvery = 8;
constexpr double kBlockingShare = 0.4;
// Better, where those steps hide it: the round applied 2 steps after it starts, the rank
// training on meanwhile. Not 1 step: a round's allreduce phases move on only inside MPI calls,
// a few a step. Where 2 steps do not hide it and 4 do, applied 4 steps on: `cnn` on the
// emulated 20 Mbit/s hosts reaches its target sooner than with blocking rounds.
constexpr int kOverlapSteps = 2, kLateOverlapSteps = 4;
// Where no round every 8 steps fits (a WLAN cell): int4 every 16, applied 8 steps on even if
// the ranks then wait for the rest: `cnn` reaches its target sooner than with the int8 rounds
// every 32 that would hide. That wait may cost a fifth of the time, not the two fifths of a
// blocking round: where int4 rounds far outlast the steps (`mlp`), PowerSGD rounds that hide
// make faster steps.
constexpr int kWaitingEvery = 2 * kBlockingEvery;
constexpr double kWaitingShare = kCommShare;
// Full-rank rounds (bf16, int8) go up to K = 32; then PowerSGD, from K = 16 (what its rounds
// cost a rank beyond the link's time, compression and two allreduces, pays only that rarely)
// to 128, where a WLAN cell carries `mlp`'s PowerSGD rounds behind its steps.
// First, up to K = 48, a PowerSGD round applied K/2 steps after it starts (the ranks drift
// apart for 1.5 K steps instead of 2 K), where its K/2 steps hide it; else one applied at the
// next round, the smallest K that hides it: `mlp` learns less at K = 64 applied 32 on than at
// K = 32 applied at the next round, and no more at 128.
constexpr int kMaxFullRankEvery = 32;
constexpr int kMinLowRankEvery = 16, kMaxHalfDelayEvery = 48, kMaxEvery = 128;
// Local SGD's rounds move the anchor by DiLoCo's outer Nesterov step: a small lr and high
// momentum average the rounds' noise and still step ~1.75x their mean change. For PowerSGD
// rounds 0.35/0.8 reaches the target sooner than 0.5/0.5 or the plain mean; an outer lr of 1
// with momentum 0.8 diverges. Full-rank rounds gain from it too: sooner to the target, and a
// higher final accuracy.
// Rounds from K = 24 on take 0.5/0.8 (~2.5x their mean change): the mean of models that drifted
// apart longer moves less than their steps did. There it reaches the target sooner, and ends
// closer to per-step sync; below K = 24 it ends lower than 0.35/0.8.
constexpr float kRoundOuterLr = 0.35f, kFarRoundOuterLr = 0.5f, kRoundOuterMomentum = 0.8f;
constexpr int kMinFarRoundEvery = 24;
// Rounds more than kMaxHalfDelayEvery steps apart (always applied at the next round) leave the
// ranks apart for 2K steps: there their own steps take 0.7 of the lr, which takes `mlp` (PowerSGD
// rank 16, outer step 0.5/0.8) to the target sooner and to a higher final accuracy. Closer
// rounds gain nothing from it.
constexpr float kLongRoundInnerLrScale = 0.7f;
constexpr int64_t kProbeBytes = 64 * 1024;

struct Candidate {
  int every;  // K; 1: gradients every step
  WireType wire;
  bool overlap;
  // Overlapped: applied this many steps after it started; 0: at the next round.
  int overlap_steps = 0;
  // Applied overlap_steps on even if it outlasts them: the ranks wait for the rest.
  bool waits = false;
};

// In order of preference. bf16 and int8 keep nearly all of a round and PowerSGD's low rank
// drops much (`cnn` on WLAN at K = 8 reaches its target sooner in int8), so full-rank
// rounds come first. Overlapped bf16 and int8 start at the blocking round's K: a round that 4
// overlapped steps would hide, a blocking round every 8 affords. int4 every 16 with its 8 steps'
// leave fits wherever bf16 or int8 every 16 would, so those are not tried. PowerSGD's K is the
// smallest that hides its round, not a power of two.
std::vector<Candidate> candidates_by_preference() {
  std::vector<Candidate> c = {{1, WireType::fp32, false},
                              {1, WireType::bf16, false},
                              {kBlockingEvery, WireType::int4, true, kOverlapSteps},
                              {kBlockingEvery, WireType::int4, true, kLateOverlapSteps},
                              {kBlockingEvery, WireType::int4, false},
                              {kBlockingEvery, WireType::bf16, true},
                              {kBlockingEvery, WireType::int8, true},
                              {kWaitingEvery, WireType::int4, true, kWaitingEvery / 2, true},
                              {kMaxFullRankEvery, WireType::bf16, true},
                              {kMaxFullRankEvery, WireType::int8, true}};
  for (int every = kMinLowRankEvery; every <= kMaxHalfDelayEvery; every += 2)
    c.push_back({every, WireType::powersgd, true, every / 2});
  for (int every = kMinLowRankEvery; every <= kMaxEvery; ++every)
    c.push_back({every, WireType::powersgd, true});
  return c;
}

std::string kb(int64_t bytes) { return format_number("%.0f KB", double(bytes) / 1e3); }
std::string ms(double seconds) {
  return format_number(seconds < 0.01 ? "%.2f ms" : "%.0f ms", seconds * 1e3);
}

// Seconds of `reps` calls, after one to warm up (the connections are made already:
// Comm::connect_all): the nth fastest, from 0.
double nth_fastest_seconds(int reps, int nth, const std::function<void()>& call) {
  std::vector<double> t;
  for (int i = 0; i <= reps; ++i) {
    const double t0 = seconds_now();
    call();
    if (i > 0) t.push_back(seconds_now() - t0);
  }
  return nth_smallest(t, size_t(nth));
}

// The link's fixed cost: a blocking allreduce of one number, the lower quartile of 8. Not the
// median of 5: what slows a call here is the hosts, not the link (a rank still busy from
// start-up, or held back by its CPU quota), and where it slows most calls their median
// overstates the latency several times, and the rounds come rarer than the link needs. Not the
// rounds' nonblocking allreduce, which takes one float on four ranks through the ring's six
// phases (Open MPI's fallback for so few values), each waiting for any host that its CPU quota
// holds back.
double time_latency(Comm& comm) {
  return nth_fastest_seconds(8, 2, [&] {
    double one = 1;
    comm.allreduce_sum(&one, 1);
  });
}

// A round's cost a byte: nonblocking allreduces of kProbeBytes, as the rounds travel. The
// faster of two: a slow call on a busy host can make a round look several times too costly, and
// the rounds rarer than the link needs; each call costs the start-up a tenth of a second on a
// WLAN.
double time_probe(Comm& comm) {
  std::vector<float> send(kProbeBytes / sizeof(float), 1.0f), recv(send.size());
  return nth_fastest_seconds(2, 0, [&] {
    MPI_Request req;
    comm.start_allreduce(send.data(), recv.data(), int(send.size()), MPI_FLOAT, MPI_SUM, &req);
    comm.wait(req);
  });
}

// Rounds travel by the faster of the two allreduce algorithms for this link, as estimated from
// the probes (timing rounds of each took longer than the rest of the start-up together): in each
// of its 2 log2(P) phases the binomial tree (reduce to rank 0, then broadcast) sends the whole
// round where Rabenseifner's sends a share, 2 log2(P) B against 2 (P-1)/P B. The tree also
// where within kBinomialLeeway of Rabenseifner's, as where latency dominates: it sends fewer
// messages, which beside training wait less for a rank that its CPU quota holds back
// (bench/cluster.sh). The choice stays set, and goes into `choice` with the two estimates.
constexpr double kBinomialLeeway = 1.1;
void choose_round_allreduce(int ranks, const LinkTiming& link, SyncChoice& choice,
                            int64_t round_bytes) {
  const int calls = choice.opts.wire == WireType::powersgd ? 2 : 1;
  const double rabenseifner = link.allreduce_seconds(round_bytes, calls);
  const double levels = std::ceil(std::log2(double(ranks)));
  const double binomial =
      link.allreduce_seconds(int64_t(double(round_bytes) * levels * ranks / (ranks - 1)), calls);
  const AllreduceAlgorithm best = binomial <= kBinomialLeeway * rabenseifner
                                      ? AllreduceAlgorithm::binomial
                                      : AllreduceAlgorithm::rabenseifner;
  if (!set_allreduce_algorithm(best)) return;
  const bool tree = best == AllreduceAlgorithm::binomial;
  choice.allreduce = tree ? "binomial" : "rabenseifner";
  choice.why += std::string("; rounds by ") + allreduce_algorithm_name(best) +
                " allreduce (an estimated " + ms(tree ? binomial : rabenseifner) + " a round, by " +
                allreduce_algorithm_name(tree ? AllreduceAlgorithm::rabenseifner
                                              : AllreduceAlgorithm::binomial) +
                " " + ms(tree ? rabenseifner : binomial) + ")";
}

// The banner's account of a choice: what it does, against what was measured.
std::string describe_choice(const SyncOptions& o, bool no_fit, int64_t bytes, double round_seconds,
                            double fp32_seconds, double step_seconds, const LinkTiming& link) {
  const std::string what =
      (o.sync_every == 1
           ? std::string("gradients every step")
           : "rounds every " + std::to_string(o.sync_every) + " steps, " +
                 (o.overlap_steps ? "overlapped and applied " + std::to_string(o.overlap_steps) +
                                        " steps later,"
                  : o.overlap ? "overlapped"
                              : "blocking")) +
      " in " + wire_type_name(o.wire) +
      (o.wire == WireType::powersgd ? " rank " + std::to_string(o.powersgd_rank) : "") + " (" +
      kb(bytes) + " an average, " + ms(round_seconds) + ")" +
      (o.outer_momentum > 0 ? ", outer Nesterov " + format_number("%g", o.outer_lr) + "/" +
                                  format_number("%g", o.outer_momentum)
                            : "") +
      (o.inner_lr_scale != 1 ? ", inner lr " + format_number("%g", o.inner_lr_scale) + "x" : "");
  const std::string against = o.sync_every == 1
                                  ? "a " + ms(step_seconds) + " step"
                                  : std::to_string(o.sync_every) + " steps of " + ms(step_seconds);
  return what + " against " + against +
         (no_fit ? ": the most frugal choice, and still too slow a link for this model" : "") +
         (o.sync_every == 1 && o.wire == WireType::fp32
              ? ""
              : "; fp32 every step would take " + ms(fp32_seconds) + " a step") +
         " (link: " + ms(link.latency) + " an allreduce, " +
         format_number("%.1f", 1e-6 / std::max(link.seconds_per_byte, 1e-12)) + " MB/s)" +
         (o.max_sync_every > o.sync_every
              ? std::string(o.overlap_steps ? "; rounds applied at the next round, then K growing"
                                            : "; K growing") +
                    " (up to " + std::to_string(o.max_sync_every) +
                    ") while the rounds cost a rank over " +
                    format_number("%.0f", kSlowRoundCost / 10.0) + " % of its time"
              : "");
}

}  // namespace

SyncChoice choose_sync(const SyncOptions& given, double step_seconds, const LinkTiming& link,
                       int64_t n_params, const std::vector<WireMatrix>& matrices) {
  const std::vector<Candidate> candidates = candidates_by_preference();
  auto round = [&](const Candidate& c, int64_t* bytes) {  // seconds an average takes
    *bytes = wire_bytes(c.wire, n_params, wire_options(given, matrices));
    return link.allreduce_seconds(*bytes, c.wire == WireType::powersgd ? 2 : 1);
  };
  // Every step, the allreduce waits in full; so does a blocking round, once every K steps; a
  // round overlapped with K steps (or with the steps until it is applied) costs only what
  // outlasts them, and may not outlast them unless it waits (less than a blocking round may).
  auto fits = [&](const Candidate& c) {
    int64_t bytes;
    const double t = round(c, &bytes);
    const double wait = c.overlap ? std::max(0.0, t - c.overlap_steps * step_seconds) : t;
    if (c.every == 1) return t <= kCommShare * step_seconds;
    if (!c.overlap || c.waits)
      return wait <= (c.waits ? kWaitingShare : kBlockingShare) * (c.every * step_seconds + wait);
    return t <= kOverlapShare * (c.overlap_steps ? c.overlap_steps : c.every) * step_seconds;
  };
  const auto it = std::find_if(candidates.begin(), candidates.end(), fits);
  const Candidate pick = it != candidates.end() ? *it : candidates.back();
  int64_t bytes = 0, fp32_bytes = 0;
  const double t = round(pick, &bytes), fp32 = round(candidates.front(), &fp32_bytes);
  SyncChoice choice{given, "", ""};
  choice.opts.strategy = pick.every == 1 ? "per-step" : "local-sgd";
  choice.opts.sync_every = pick.every;
  choice.opts.wire = pick.wire;
  choice.opts.error_feedback = pick.wire != WireType::fp32;
  choice.opts.overlap = pick.overlap;
  choice.opts.overlap_steps = pick.overlap_steps;
  // Overlapped full-rank rounds may be applied at the next round and K grow to kMaxEvery during
  // the run:
  // wherever a round costs a rank more than the probe measured (waits for a host still busy
  // with its step or held back by its CPU quota; the CPU of its passes, its encoding and its
  // messages) until the steps take at most about 1.18x their time alone (bench/step_cost.sh).
  // PowerSGD's pace stays: with its low rank, mlp learns less a step as K doubles. A blocking
  // round's cost is what the probe measured.
  const bool adapts = pick.overlap && pick.wire != WireType::powersgd;
  choice.opts.max_sync_every = adapts ? kMaxEvery : 0;
  if (pick.every > 1) {
    choice.opts.outer_lr = pick.every >= kMinFarRoundEvery ? kFarRoundOuterLr : kRoundOuterLr;
    choice.opts.outer_momentum = kRoundOuterMomentum;
    choice.opts.inner_lr_scale = pick.every > kMaxHalfDelayEvery ? kLongRoundInnerLrScale : 1.0f;
  }
  choice.why =
      describe_choice(choice.opts, it == candidates.end(), bytes, t, fp32, step_seconds, link);
  return choice;
}

SyncChoice auto_sync(Comm& comm, const SyncOptions& given, double step_seconds, int64_t n_params,
                     const std::vector<WireMatrix>& matrices) {
  double slowest[3] = {time_latency(comm), time_probe(comm), step_seconds};
  comm.allreduce_max(slowest, 3);
  LinkTiming link{slowest[0], std::max(slowest[1] - slowest[0], 0.0) / double(kProbeBytes)};
  SyncChoice choice = choose_sync(given, slowest[2], link, n_params, matrices);
  if (choice.opts.sync_every > 1)
    choose_round_allreduce(
        comm.size(), link, choice,
        wire_bytes(choice.opts.wire, n_params, wire_options(choice.opts, matrices)));
  return choice;
}

}  // namespace pitrain
