#include "pitrain/run_control.h"

#include <csignal>

#include "pitrain/clock.h"
#include "pitrain/error.h"
#include "pitrain/finite.h"

namespace pitrain {
namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_signal) {  // the second signal: stop now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  g_signal = sig;
}

}  // namespace

StopSignals::StopSignals() {
  g_signal = 0;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

StopSignals::~StopSignals() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

int StopSignals::requested() const { return g_signal; }

StopVote::StopVote(Comm& comm) : comm_(comm) {
  if (comm_.size() > 1) votes_ = comm_.duplicate();
}

Vote StopVote::exchange(Vote local) {
  if (comm_.size() == 1) return local;
  Vote agreed;
  if (request_ != MPI_REQUEST_NULL) {
    comm_.wait(request_);
    agreed = {vote_[0], vote_[1]};
  }
  vote_[0] = local.signal, vote_[1] = local.round_cost;
  comm_.start_allreduce(MPI_IN_PLACE, vote_, 2, MPI_INT, MPI_MAX, &request_, votes_);
  return agreed;
}

StopVote::~StopVote() {
  if (request_ != MPI_REQUEST_NULL) comm_.wait(request_);
  if (votes_ != MPI_COMM_NULL) MPI_Comm_free(&votes_);
}

namespace {

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

}  // namespace

RunControl::RunControl(const TrainOptions& o, Comm& comm, SyncStrategy& sync, Model& model,
                       Optimizer& opt, const RunState& state,
                       const std::vector<std::string>& class_names)
    : o_(o),
      comm_(comm),
      sync_(sync),
      model_(model),
      opt_(opt),
      state_(state),
      progress_file_(comm.rank() == 0 ? o.progress_file : ""),
      vote_(comm),
      last_save_(seconds_now()) {
  if (comm.rank() == 0) writer_.emplace(model, opt, class_names);
}

StepDecision RunControl::after_step(int64_t step) {
  progress_file_.update(state_.step, seconds_now());
  // By steps: the same on every rank, no vote needed (local SGD agrees on a model before saving).
  const bool by_steps = o_.checkpoint_every_steps && state_.step % o_.checkpoint_every_steps == 0;
  if (!sync_.meets_at(step)) return {0, by_steps};  // no vote: a signal waits for the next meeting
  int local = signals_.requested()              ? signals_.requested()
              : progress_file_.stop_requested() ? SIGTERM
                                                : 0;
  // Rank 0 asks for a save by the clock at most once a vote's round trip.
  if (!local && comm_.rank() == 0 && o_.checkpoint_seconds && !clock_asked_ &&
      seconds_now() - last_save_ >= o_.checkpoint_seconds)
    local = kSaveVote, clock_asked_ = true;
  const Vote agreed = vote_.exchange({local, sync_.take_round_cost()});
  sync_.pace(step, agreed.round_cost);
  if (agreed.signal == kSaveVote) clock_asked_ = false;
  if (agreed.signal > kSaveVote) return {agreed.signal, false};
  return {0, agreed.signal == kSaveVote || by_steps};
}

bool RunControl::saves_at_end(int epoch, bool due) const {
  return !o_.checkpoint.empty() && (due || epoch % o_.checkpoint_every == 0 || epoch == o_.epochs);
}

void RunControl::save(const std::string& path, bool wait) {
  run_together(comm_, [&] {
    if (!writer_) return;
    // Finite gradients times a large --lr can still overflow a weight: such a file could not
    // be resumed, so the last good one stays.
    if (!all_finite(model_.params().data(), model_.num_params()))
      throw Error("step " + std::to_string(state_.step) +
                  ": the weights hold NaN or Inf (the steps are too large); lower --lr; " +
                  "not saved (" + path + " is left as it was)");
    writer_->save(path, model_, opt_, state_);
    if (wait) writer_->wait();
  });
  last_save_ = seconds_now();
}

void RunControl::stop(int signal, int epoch, TrainReport& report) {
  const std::string path = o_.checkpoint.empty() ? "pitrain-stopped.h5" : o_.checkpoint;
  sync_.agree_final(model_.params().data(), state_.step - 1);
  save(path, true);
  report.stopped(signal_name(signal), state_.step, epoch, state_.epoch_step, path);
  throw Stopped{128 + signal};
}

void RunControl::finish() {
  run_together(comm_, [&] {
    if (writer_) writer_->wait();
  });
}

}  // namespace pitrain
