// How the ranks' models meet. fit() drives every strategy through the same calls at every step;
// the strategy decides what to send and when, and the wire format (wire.h) how it travels.
//   per-step   gradients averaged every step (the default), optionally in buckets during backward
//   local-sgd  K steps alone, then what the ranks learnt is averaged, optionally during the next K
// (and on one rank, none: nothing to send). --sync takes them by name from one table in
// strategy.cpp; a new strategy is a row there and a file of its own (docs/extending.md).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pitrain/comm.h"
#include "pitrain/model.h"
#include "pitrain/optimizer.h"
#include "pitrain/wire.h"

namespace pitrain {

struct SyncOptions {
  std::string strategy = "per-step";  // a name from sync_strategies()
  int sync_every = 1;                 // local SGD's K: steps between rounds
  int64_t sync_warmup = 0;  // steps of per-step gradient averaging before local SGD starts
  WireType wire = WireType::fp32;
  bool error_feedback = false;  // carry what 16-, 8- or 4-bit rounding drops into the next step
  int powersgd_rank = 16;
  // Local SGD's outer optimizer (DiLoCo): the anchor moves by outer_lr x (the mean change plus
  // Nesterov momentum of the past rounds' means). 1 and 0: the plain mean.
  float outer_lr = 1.0f, outer_momentum = 0.0f;
  // The ranks' own steps take this share of --lr, the whole run (--sync auto's rare PowerSGD
  // rounds: with hundreds of steps between them, shorter steps drift apart less and the outer
  // step makes up).
  float inner_lr_scale = 1.0f;
  // Per-step sync: start each bucket's allreduce as soon as backward has made it. Local SGD:
  // average during the next K steps, and apply the average (plus those steps) one round late.
  bool overlap = false;
  // Overlapped local SGD: apply each average this many steps after its round started, if that
  // is sooner than the next round (0: at the next round). The ranks then drift apart for
  // K + overlap_steps steps instead of 2K (Streaming DiLoCo's overlap of tau inner steps).
  int overlap_steps = 0;
  int64_t bucket_bytes = 1 << 20;
  // Overlapped local SGD (--sync auto): after two rounds in a row cost a rank over
  // kSlowRoundCost of its time, rounds are applied at the next round (RoundPace), then K grows,
  // up to this. 0: K and overlap_steps stay as given.
  int max_sync_every = 0;
};

// round_cost of a vote when no round was timed (the same on every rank).
constexpr int kNotTimed = -1;

// One step, as fit() calls it (`step` is global and 0-based):
//   backward ... gradients_ready(lo) ... ; reduce_gradients ; optimizer step ; after_update.
// At an epoch end common_params() or agree(); agree_final() at the last epoch's end or a stop.
// Where meets_at(step), the run's stop vote (run_control.h) rides on the meeting: it carries
// take_round_cost() and hands the ranks' largest to pace().
class SyncStrategy {
 public:
  SyncStrategy() = default;
  virtual ~SyncStrategy() = default;
  SyncStrategy(const SyncStrategy&) = delete;
  SyncStrategy& operator=(const SyncStrategy&) = delete;

  // During backward: grads[lo, n) are final (the last layers come first), lo falls to 0.
  virtual void gradients_ready(float* grads, int64_t lo, int64_t step) = 0;
  // After backward: makes `grads` what the optimizer is to follow and tells the optimizer what
  // they are. True when they are now the same on every rank.
  virtual bool reduce_gradients(float* grads, int64_t step, Optimizer& opt) = 0;
  virtual void after_update(float* params, int64_t step) = 0;
  // Leaves every rank with the same parameters (a checkpoint, a stop, the last epoch's end).
  virtual void agree(float* params, int64_t step) = 0;
  // The same where the run ends after `step` (its last epoch, a stop): nothing a rank learnt may
  // stay behind on it.
  virtual void agree_final(float* params, int64_t step) { agree(params, step); }
  // The ranks' common parameters for validation at an epoch end, without a round of their own:
  // `params` where the ranks never differ. Local SGD finishes the round in flight and gives
  // where it left the ranks (up to K steps back); `params` keep this rank's steps since.
  virtual const float* common_params(float* params, int64_t) { return params; }
  // Steps between the ranks' meetings now (1: every step).
  virtual int sync_every() const { return 1; }
  // Whether the ranks communicate after `step` anyway (every step, or local SGD's rounds).
  virtual bool meets_at(int64_t step) const = 0;
  // Per mille of this rank's time between its last two rounds spent in their work (then
  // kNotTimed until the next round is timed).
  virtual int take_round_cost() { return kNotTimed; }
  // The ranks' largest take_round_cost() at the meeting before, read after `step`: where a
  // strategy may change K.
  virtual void pace(int64_t, int) {}
};

// Per-step averaging of the gradients over the wire format. Local SGD uses it for its warm-up.
class PerStepSync : public SyncStrategy {
 public:
  PerStepSync(Comm& comm, int64_t n_params, const SyncOptions& opts,
              const std::vector<WireMatrix>& matrices);
  void gradients_ready(float* grads, int64_t lo, int64_t step) override;
  bool reduce_gradients(float* grads, int64_t step, Optimizer& opt) override;
  void after_update(float*, int64_t) override {}
  void agree(float*, int64_t) override {}  // the ranks never differ
  WireAverage& wire() { return *wire_; }
  bool meets_at(int64_t) const override { return true; }

 private:
  std::unique_ptr<WireAverage> wire_;
  int64_t bucket_ = 0;       // floats a bucket with overlap; 0: one allreduce after backward
  int64_t started_down_to_;  // gradients [started_down_to_, n) are in flight
};

// A round costs too much where its work takes over this share (per mille) of a rank's time
// between two rounds: its steps then take over 1.18x the time they take alone. Where the link
// is fast, that is mostly the CPU the round takes; where it is slow, the waits. Tuned with
// bench/step_cost.sh (the step on 4 hosts against 1) and checked with bench/cluster.sh (time to a
// target) and bench/sync_accuracy.sh (final accuracy): bench/RESULTS.md, "Step cost".
constexpr int kSlowRoundCost = 150;

// Local SGD's pace with max_sync_every: after two votes in a row said the rounds cost a rank
// over kSlowRoundCost, a round applied overlap_steps after its start is applied at the next
// round instead, and once it is, K grows by a power of two (up to max_every) that the votes'
// cost says brings it under the bound. Fed the same votes, every rank holds the same pace.
class RoundPace {
 public:
  RoundPace(int every, int delay, int max_every)
      : every_(every), delay_(delay), max_every_(max_every) {}
  int every() const { return every_; }
  // Steps from a round's start to its use; 0: at the next round.
  int delay() const { return delay_; }
  // The pace may still change: time the rounds.
  bool adapts() const { return delay_ > 0 ? max_every_ > 0 : every_ < max_every_; }
  // The largest take_round_cost() of a vote, in the order read; true when K grew.
  bool update(int agreed_cost);

 private:
  int every_, delay_, max_every_;
  int slow_rounds_ = 0;      // votes in a row that said slow
  int least_slow_ = 0;       // the smallest cost among them
  bool stale_vote_ = false;  // the next vote tells of a round of the old pace
};

// The strategies' names and what each does, as --sync takes them.
std::vector<std::pair<std::string, std::string>> sync_strategies();

// The strategy the options ask for (by name; on one rank, none), given the parameters every rank
// starts from and the 2-D weights among them (which PowerSGD compresses).
std::unique_ptr<SyncStrategy> make_sync_strategy(Comm& comm, const float* params, int64_t n_params,
                                                 const SyncOptions& opts,
                                                 const std::vector<WireMatrix>& matrices = {});

// --sync auto. The link as an allreduce sees it: a fixed cost a call and a cost a byte.
struct LinkTiming {
  double latency = 0;           // seconds: a blocking allreduce of one number
  double seconds_per_byte = 0;  // beyond that, a byte handed to the allreduce
  double allreduce_seconds(int64_t bytes, int calls) const {
    return calls * latency + double(bytes) * seconds_per_byte;
  }
};

struct SyncChoice {
  SyncOptions opts;
  std::string why;  // for the banner: what was measured and why this was chosen
  // The rounds' allreduce as timed and chosen: "rabenseifner" or "binomial"; "" not chosen.
  std::string allreduce;
};

// The first schedule and wire format, in order of preference (per-step fp32, per-step bf16,
// then local SGD rounds: int4 every 8 steps, applied 2 or 4 steps after they start, or else
// blocking; overlapped every 8 steps in bf16 or int8; int4 every 16 applied 8 steps on; bf16
// or int8 every 32; then PowerSGD every 16 to 48 applied K/2 steps on, and every 16 to 128
// applied at the next round), whose communication fits this link: per-step allreduces cost the
// step at most a fifth, a blocking round at most two fifths of its K steps and itself, an
// overlapped round takes no longer than the steps it hides behind (K, or the 2, 4 or K/2 before
// it is applied), except int4 every 16, whose wait for what outlasts its 8 steps may cost as much
// as a blocking round; else the most frugal. Overlapped full-rank rounds (bf16, int8, int4) may
// then be applied at the next round and grow K during the run, up to 128 (max_sync_every). A pure
// function: every rank that passes the same figures gets the same choice.
SyncChoice choose_sync(const SyncOptions& given, double step_seconds, const LinkTiming& link,
                       int64_t n_params, const std::vector<WireMatrix>& matrices);
// Times allreduces of one float and of 64 KB (collective), agrees with the other ranks on the
// slowest figures and on the slowest step_seconds, and chooses.
SyncChoice auto_sync(Comm& comm, const SyncOptions& given, double step_seconds, int64_t n_params,
                     const std::vector<WireMatrix>& matrices);

// A model's kernels as 2-D weights: (fan-in, units) for dense, (kh * kw * cin, filters) for conv.
std::vector<WireMatrix> weight_matrices(const Model& model);

// What the wire format needs of the options: error feedback, PowerSGD's rank, the 2-D weights.
inline WireOptions wire_options(const SyncOptions& opts, const std::vector<WireMatrix>& matrices) {
  return WireOptions{opts.error_feedback, opts.powersgd_rank, matrices};
}

}  // namespace pitrain
