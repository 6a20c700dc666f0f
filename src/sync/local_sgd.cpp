// Local SGD: each rank takes K steps alone, then a round averages what the ranks learnt since
// their last common parameters (the "anchor"), in the wire format. With overlap a round runs
// during the next K steps (or overlap_steps, if fewer) and is then applied, keeping the steps
// taken meanwhile. Each rank keeps its own optimizer state: averaging Adam's moments too would
// triple the traffic. What a lossy round did not carry of a rank's change (error feedback's
// residual: its low rank's rest, its rounding) stays in that rank's model, as in CHOCO-SGD
// (Koloskova et al., 2019), and so goes with the next round: the ranks agree on what the round
// carried and each keeps the rest of its own. Waiting aside in the wire instead, it would be
// missing from the models until a later round carried it, and `mlp` with the WLAN cell's
// PowerSGD rounds would end less accurate (bench/sync_accuracy.sh; bench/RESULTS.md, "Final
// accuracy of the rounds `--sync auto` takes"). The first sync_warmup steps average gradients,
// as per-step sync does.
// An outer optimizer (DiLoCo, Douillard et al., 2023) may move the anchor by more than the mean
// change: Nesterov momentum over the rounds, which keeps large K accurate.
// With max_sync_every (--sync auto) the rounds grow rarer (RoundPace) while they cost a rank
// too much: the share of its time between two rounds spent in the rounds' work. That is the
// waits for a round (MPI moves a nonblocking allreduce only inside MPI calls, a few a step, so a
// round that takes two steps on an idle link may need more steps' worth of calls beside
// training), and, where the link is fast, the CPU a round takes: its passes over the
// parameters, the wire's encoding and reduction, and the MPI and kernel work of its messages in
// those calls. Under a CPU quota its stops fall into that work in proportion. The vote takes the
// largest cost: on the emulated hosts the ranks pay unequally. A rank that is merely slower than
// the others raises K too (it waits for them; to no gain): hence the cap.
#include <mpi.h>

#include <algorithm>
#include <utility>

#include "pitrain/sync.h"

namespace pitrain {

// The pace changes after two slow rounds in a row (one alone may be a hiccup). First a round
// applied a few steps after its start is applied at the next round: one that outlasts the steps
// before its use keeps the rank waiting. Then K grows by the power of two that brings the
// smaller of the two costs under kSlowRoundCost, were a round's cost the same at any K (a
// round's work is the same; the steps between grow). The vote read at a round is cast a round
// before it and tells of the time between the two rounds before that: after a change, the next
// one still tells of the old pace. Rounds not timed (after an agreement or a validation) count
// neither way.
bool RoundPace::update(int agreed_cost) {
  if (std::exchange(stale_vote_, false) || !adapts() || agreed_cost == kNotTimed) return false;
  if (agreed_cost <= kSlowRoundCost) {
    slow_rounds_ = 0;
    return false;
  }
  least_slow_ = slow_rounds_++ ? std::min(least_slow_, agreed_cost) : agreed_cost;
  if (slow_rounds_ < 2) return false;
  slow_rounds_ = 0;
  stale_vote_ = true;
  if (delay_ > 0) {
    delay_ = 0;
    return false;
  }
  // Cost c at K: c K' / K of (1 - c) K' / K + c at K' = g K stays under the bound b when
  // c (1 - b) <= g b (1 - c).
  const int64_t c = least_slow_, b = kSlowRoundCost;
  int64_t g = 2;
  while (every_ * g < max_every_ && c * (1000 - b) > g * b * (1000 - c)) g *= 2;
  every_ = int(std::min<int64_t>(every_ * g, max_every_));
  return true;
}

namespace {

class LocalSgd : public SyncStrategy {
 public:
  LocalSgd(Comm& comm, const float* params, int64_t n, const SyncOptions& opts,
           const std::vector<WireMatrix>& matrices)
      : comm_(comm),
        per_step_(comm, n, opts, matrices),
        pace_(opts.sync_every, opts.overlap_steps, opts.overlap ? opts.max_sync_every : 0),
        warmup_(opts.sync_warmup),
        first_(opts.sync_warmup),
        overlap_(opts.overlap),
        outer_lr_(opts.outer_lr),
        outer_momentum_(opts.outer_momentum),
        anchor_(params, params + n),
        delta_(size_t(n)),
        momentum_(opts.outer_momentum > 0 ? size_t(n) : 0) {}

  void gradients_ready(float* grads, int64_t lo, int64_t step) override {
    if (step < warmup_)
      per_step_.gradients_ready(grads, lo, step);
    else
      busy([&] { per_step_.wire().progress(); });  // a round in flight
  }

  // A rank's own gradient is one of P whose mean the averaged steps follow: Adam is told, so
  // that its second moment estimates that of the mean.
  bool reduce_gradients(float* grads, int64_t step, Optimizer& opt) override {
    if (step < warmup_) return per_step_.reduce_gradients(grads, step, opt);
    opt.set_noise_share(1.0f / float(comm_.size()));
    return false;
  }

  void after_update(float* params, int64_t step) override {
    if (step < warmup_) {  // the ranks stay equal; the last warm-up step is the first anchor
      if (step + 1 == warmup_) {
        std::copy(params, params + anchor_.size(), anchor_.begin());
        // The residual holds gradients (what rounding left of the warm-up's last average); the
        // rounds send changes of the parameters, which it must not join.
        per_step_.wire().clear_residual();
      }
      return;
    }
    busy([&] {
      if (pace_.delay() > 0 && round_step_ >= 0 && step - round_step_ >= pace_.delay())
        finish_round(params, step, false, Residual::in_model);
      if (round_after(step)) round(params, step, pace_.adapts(), Residual::in_model);
      per_step_.wire().progress();
    });
  }

  void agree(float* params, int64_t step) override {
    if (step < warmup_) return;
    // This step's blocking round left its residual in the model: back to the wire.
    if (kept_at_ == step) {
      for (size_t i = 0; i < anchor_.size(); ++i)
        delta_[i] = params[i] - anchor_[i], params[i] = anchor_[i];
      per_step_.wire().return_residual(delta_.data());
    }
    // A round cut short (epoch end, checkpoint) says nothing of K.
    round(params, step, false, Residual::in_wire);
    finish_round(params, step, false, Residual::in_wire);
    per_step_.wire().progress();
  }

  // A round would leave behind what its low rank or its rounding drops, which each rank keeps
  // for the rounds after, and there are none. So the last agreement averages each rank's steps
  // since the anchor, with what the rounds left in its model and the wire's residual of a round
  // cut short, taken whole (no outer step), in int8 (a quarter of fp32's bytes; its rounding is
  // small beside the weights). It brings PowerSGD rounds' final accuracy to about per-step
  // sync's (bench/sync_accuracy.sh).
  void agree_final(float* params, int64_t step) override {
    if (step < warmup_) return;
    finish_round(params, step, false, Residual::in_wire);
    const std::vector<float>& residual = per_step_.wire().residual();
    for (size_t i = 0; i < anchor_.size(); ++i)
      delta_[i] = params[i] - anchor_[i] + (residual.empty() ? 0.0f : residual[i]);
    const auto whole =
        make_wire_average(WireType::int8, comm_, int64_t(delta_.size()), WireOptions{});
    whole->start(delta_.data(), 0, int64_t(delta_.size()));
    const std::vector<float>& mean = whole->finish();
    for (size_t i = 0; i < anchor_.size(); ++i) params[i] = anchor_[i] += mean[i];
    per_step_.wire().clear_residual();
  }

  // An epoch's validation waits at most for the round in flight, never for a round of its own,
  // which would lengthen every epoch on a slow link. Where rounds are applied at the next round,
  // one that started under K/4 steps ago would keep the ranks waiting for most of it: validation
  // then takes the common model before it, and the round goes on. That takes `mlp` in the WLAN
  // cell (K = 128) to its target sooner, though a validation later (bench/cluster.sh).
  const float* common_params(float* params, int64_t step) override {
    if (step < warmup_) return params;
    if (!young_round(step)) finish_round(params, step, false, Residual::in_model);
    since_ = -1;  // the validation that follows is not the rounds' cost
    return anchor_.data();
  }

  int sync_every() const override { return pace_.every(); }
  bool meets_at(int64_t step) const override { return step < warmup_ || round_after(step); }

  int take_round_cost() override { return std::exchange(round_cost_, kNotTimed); }

  void pace(int64_t step, int agreed_cost) override {
    if (pace_.update(agreed_cost)) first_ = step + 1;
  }

 private:
  // Rounds follow every K steps from step first_ on (K and first_ change when K grows).
  bool round_after(int64_t step) const {
    return step >= first_ && (step + 1 - first_) % pace_.every() == 0;
  }
  // A round in flight, to be applied at the next round, that started under K/4 steps before `step`.
  bool young_round(int64_t step) const {
    return pace_.delay() == 0 && round_step_ >= 0 && 4 * (step - round_step_) < pace_.every();
  }

  // Where a finished round leaves its residual: in this rank's model while training, in the
  // wire at an agreement, where every rank must end with the anchor.
  enum class Residual { in_model, in_wire };

  // Applies the round in flight, if any, and starts one of what was learnt since the anchor.
  // `timed`: measure the rounds' share of the time since the last timed round (round_cost_);
  // untimed, the next round is not measured either.
  void round(float* params, int64_t step, bool timed, Residual residual) {
    if (step == started_after_) return;
    time_round(timed);
    if (round_step_ >= 0) {
      finish_round(params, step, true, residual);
    } else {
      for (size_t i = 0; i < anchor_.size(); ++i) delta_[i] = params[i] - anchor_[i];
    }
    per_step_.wire().start(delta_.data(), 0, int64_t(delta_.size()));
    round_step_ = started_after_ = step;
    if (!overlap_) finish_round(params, step, false, residual);
  }

  // The share of the time from the last timed round's start to this one's spent in the rounds'
  // work (busy_).
  void time_round(bool timed) {
    const double now = MPI_Wtime();
    if (timed && since_ >= 0)
      round_cost_ = int(1000 * std::min(1.0, (busy_ - busy_since_) / std::max(now - since_, 1e-9)));
    since_ = timed ? now : -1;
    busy_since_ = busy_;
  }

  // Runs `work`, a part of the rounds' work while training, and adds its seconds to busy_.
  template <class Work>
  void busy(Work&& work) {
    const double t0 = MPI_Wtime();
    work();
    busy_ += MPI_Wtime() - t0;
  }

  // New anchor = old anchor + the outer step from the mean of what was sent. A rank that took
  // steps since the round started keeps them on top of the new anchor; one that did not takes
  // the anchor itself, so that all such ranks hold the same bits; either, while training, adds
  // what the round did not carry of its own change (`where`). `restart`: also take what was
  // learnt since the new anchor, for the round that starts now, in the same pass (a round's
  // element-wise work is passes over memory, which a Pi has little of).
  void finish_round(float* params, int64_t step, bool restart, Residual where) {
    if (round_step_ < 0) return;
    const std::vector<float>& mean = per_step_.wire().finish();
    const std::vector<float>& residual = per_step_.wire().residual();
    const float* kept =
        where == Residual::in_model && !residual.empty() ? residual.data() : nullptr;
    if (momentum_.empty())
      apply_round<false>(mean.data(), params, step != round_step_, restart, kept);
    else
      apply_round<true>(mean.data(), params, step != round_step_, restart, kept);
    if (kept) per_step_.wire().clear_residual();
    if (kept && step == round_step_) kept_at_ = step;
    round_step_ = -1;
  }

  // finish_round's pass. The outer step: Nesterov on the mean change (the negative of DiLoCo's
  // outer gradient), as in SGD's form, or without momentum the outer lr times the mean change.
  // `kept`: the round's residual, which this rank's model keeps (nullptr: none).
  template <bool kMomentum>
  void apply_round(const float* __restrict mean, float* __restrict params, bool moved, bool restart,
                   const float* __restrict kept) {
    float* __restrict anchor = anchor_.data();
    float* __restrict delta = delta_.data();
    float* __restrict momentum = momentum_.data();
    const float lr = outer_lr_, beta = outer_momentum_;
    for (size_t i = 0; i < anchor_.size(); ++i) {
      float change;
      if constexpr (kMomentum) {
        momentum[i] = beta * momentum[i] + mean[i];
        change = lr * (mean[i] + beta * momentum[i]);
      } else {
        change = lr * mean[i];
      }
      anchor[i] += change;
      params[i] = (moved ? params[i] + change - delta[i] : anchor[i]) + (kept ? kept[i] : 0.0f);
      if (restart) delta[i] = params[i] - anchor[i];
    }
  }

  Comm& comm_;
  PerStepSync per_step_;  // the warm-up, and the wire the rounds travel on
  RoundPace pace_;
  int64_t warmup_, first_;
  bool overlap_;
  float outer_lr_, outer_momentum_;
  std::vector<float> anchor_, delta_;  // (n) the last common parameters; what this rank sent
  std::vector<float> momentum_;  // (n) the outer momentum, the same on every rank; empty without
  int64_t started_after_ = -1;   // the last step after which a round started
  int64_t round_step_ = -1;      // the step whose round is in flight; -1: none
  int64_t kept_at_ = -1;  // the last step whose blocking round left its residual in the model
  // Seconds of the rounds' work while training: their passes, encoding and MPI calls, which
  // wait for the rounds and move them on.
  double busy_ = 0;
  double since_ = -1;           // MPI_Wtime() of the last timed round's start; -1: none
  double busy_since_ = 0;       // busy_ then
  int round_cost_ = kNotTimed;  // per mille of the time between the last two rounds (time_round)
};

}  // namespace

std::unique_ptr<SyncStrategy> make_local_sgd(Comm& comm, const float* params, int64_t n,
                                             const SyncOptions& opts,
                                             const std::vector<WireMatrix>& matrices) {
  return std::make_unique<LocalSgd>(comm, params, n, opts, matrices);
}

}  // namespace pitrain
