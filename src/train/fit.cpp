// The fit loop, as llm.c's: set-up, the loop, the report. Every rank trains on its own slice;
// the sync strategy decides how the ranks' models meet.
#include "pitrain/fit.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <fstream>
#include <optional>

#include "pitrain/checkpoint.h"
#include "pitrain/checkpoint_writer.h"
#include "pitrain/clock.h"
#include "pitrain/error.h"
#include "pitrain/evaluate.h"
#include "pitrain/finite.h"
#include "pitrain/guard.h"
#include "pitrain/memory.h"
#include "pitrain/paths.h"
#include "pitrain/threads.h"
#include "pitrain/progress.h"
#include "pitrain/rng.h"

namespace pitrain {
namespace {

// What a rank trains: its data, the model, the optimizer and where the run stands.
struct Run {
  RankSlice train, val;
  Model model;
  std::unique_ptr<Optimizer> opt;
  RunState state;
  bool resumed;
};

// Rank 0's outputs that are folders or inputs fail before anything is written or trained.
void check_outputs(const TrainOptions& o) {
  // May be --resume: continue in place.
  check_output("--checkpoint", o.checkpoint, {{"--data", o.data}});
  check_output("--log", o.log_csv,
               {{"--data", o.data}, {"--resume", o.resume}, {"--checkpoint", o.checkpoint}});
  check_output("--progress-file", o.progress_file,
               {{"--data", o.data},
                {"--resume", o.resume},
                {"--checkpoint", o.checkpoint},
                {"--log", o.log_csv}});
}

// Loads this rank's slices, and on rank 0 the checkpoint to resume (all ranks fail together),
// or makes fresh weights on rank 0; then every rank starts from rank 0's weights. Only rank 0
// reads the checkpoint: on Pis it is on rank 0's disk alone (pitrain elastic restarts on other
// hosts), so the others take its model, run state and optimizer state from rank 0.
Run start_run(const TrainOptions& o, Comm& comm) {
  RankSlice train, val;
  std::optional<Checkpoint> ckpt;  // rank 0's
  std::string spec = o.model;
  run_together(comm, [&] {
    train = load_rank_slice(o.data, "train", comm.rank(), comm.size());
    val = load_rank_slice(o.data, "val", comm.rank(), comm.size());
    if (!o.resume.empty() && comm.rank() == 0) {
      ckpt.emplace(load_checkpoint(o.resume, o.batch_size));
      if (ckpt->class_names != train.class_names)
        throw Error(o.resume + ": checkpoint classes differ from " + o.data +
                    "'s class_names; resume on the same data");
      if (!o.model.empty() &&
          Model(o.model, int(train.class_names.size())).spec() != ckpt->model.spec())
        throw Error(o.resume + ": checkpoint holds the model " + ckpt->model.spec() +
                    ", not --model " + o.model +
                    "; leave out --model to continue it, or start a new run without --resume");
      spec = ckpt->model.spec();
      if (ckpt->state.epoch >= o.epochs)
        throw UsageError(o.resume + ": has trained " + std::to_string(ckpt->state.epoch) +
                         " epochs already, --epochs asks for " + std::to_string(o.epochs) +
                         "; give --epochs above " + std::to_string(ckpt->state.epoch) +
                         " to train on");
    }
  });
  check_same_dataset(comm, o.data, "train", train);
  check_same_dataset(comm, o.data, "val", val);
  if (!o.resume.empty()) comm.broadcast(spec);
  std::optional<Model> model;
  run_together(comm, [&] {
    // Inside: a model too large for this machine's memory may fail on some ranks only.
    model.emplace(ckpt ? std::move(ckpt->model) : Model(spec, int(train.class_names.size())));
    check_model_fits_memory(model->layers(), o.batch_size,
                            "--batch-size " + std::to_string(o.batch_size) + " with this model",
                            "use a smaller --batch-size");
    // The epoch's order of rows.
    check_fits_memory("--steps-per-epoch " + std::to_string(o.steps_per_epoch),
                      double(o.steps_per_epoch) * double(o.batch_size) * sizeof(int64_t),
                      "use fewer steps an epoch");
  });
  auto opt = make_optimizer(o.optimizer, model->num_params(), o.momentum);
  RunState state{0, 0, 0, o.seed};
  if (!o.resume.empty()) {
    run_together(comm, [&] {
      if (ckpt) restore_optimizer(*ckpt, *opt, o.resume);
    });
    if (ckpt) state = ckpt->state;
    uint64_t counts[6] = {uint64_t(state.epoch),      uint64_t(state.step),
                          uint64_t(state.epoch_step), state.seed,
                          uint64_t(opt->iterations),  uint64_t(state.steps_per_epoch)};
    comm.broadcast(counts, 6);
    state = RunState{int64_t(counts[0]), int64_t(counts[1]), int64_t(counts[2]), counts[3],
                     int64_t(counts[5])};
    opt->iterations = int64_t(counts[4]);
    for (auto& [name, buf] : opt->state()) comm.broadcast(buf->data(), int64_t(buf->size()));
  } else if (comm.rank() == 0) {
    model->init_params(o.seed);
  }
  comm.broadcast(model->params().data(), model->num_params());
  return Run{std::move(train), std::move(val), std::move(*model),
             std::move(opt),   state,          !o.resume.empty()};
}

// Stops the job on a NaN or Inf before it reaches a checkpoint. Where the gradients were the
// same on every rank, every rank finds the same layer: rank 0 alone reports it.
void check_finite(const Model& model, const StepResult& r, int64_t step, int epoch,
                  const std::string& checkpoint, int rank) {
  if (r.grads_finite && std::isfinite(r.stats.loss_sum)) return;
  const std::string layer = r.grads_finite ? "" : first_non_finite_layer(model);
  // The checkpoint is named only if it was written.
  const std::string msg =
      "step " + std::to_string(step + 1) + " (epoch " + std::to_string(epoch) + "): " +
      (layer.empty() ? std::string("the loss is not finite")
                     : "the gradients of " + layer + " (the first such layer) hold NaN or Inf") +
      "; lower --lr or check the data" +
      (std::ifstream(checkpoint).good() ? "; " + checkpoint + " still holds the last good state"
                                        : "");
  if (r.grads_shared && !layer.empty()) throw JointError(rank == 0 ? msg : "");
  throw Error(msg);
}

// One epoch's figures on this rank, reduced over the ranks at its end.
class EpochMeter {
 public:
  explicit EpochMeter(const Comm& comm)
      : comm_(comm),
        t0_(seconds_now()),
        mpi0_(comm.mpi_seconds()),
        bytes0_(comm.bytes_sent()),
        calls0_(comm.collectives()) {}
  void add(const LossStats& st, int n) {
    sums_[0] += st.loss_sum, sums_[1] += double(st.correct), sums_[2] += n;
  }
  double loss() const { return sums_[0] / sums_[2]; }
  double accuracy() const { return sums_[1] / sums_[2]; }
  double seconds() const { return seconds_now() - t0_; }
  double mpi_share() const { return (comm_.mpi_seconds() - mpi0_) / seconds(); }
  EpochResult result(int epoch, int64_t steps, Comm& comm) {
    EpochResult r;
    r.epoch = epoch, r.steps = steps;
    r.seconds = seconds();
    r.mpi_seconds = comm.mpi_seconds() - mpi0_;
    r.bytes_sent = comm.bytes_sent() - bytes0_;
    r.collectives = comm.collectives() - calls0_;
    comm.allreduce_sum(sums_, 3);
    r.loss = loss(), r.accuracy = accuracy();
    return r;
  }

 private:
  const Comm& comm_;
  double t0_, mpi0_;
  int64_t bytes0_, calls0_;
  double sums_[3] = {0, 0, 0};  // loss sum, correct, images
};

// Seconds of a training step on this rank's first batch, without the sync: forward, backward and
// the optimizer's update (on copies of the weights and a fresh optimizer, which the run does not
// see), after one to warm up. What --sync auto weighs the link against. The median of five
// windows, each the mean over at least 20 ms (a CPU quota, as on the emulated hosts, lets a
// short burst run at full speed: two of their 10 ms periods). One long window may read a step
// many times too long on an emulated host still busy from start-up, and the run would then take
// full-rank rounds that reach the target far later (bench/cluster.sh).
double time_step(ThreadedModel& threaded, const Split& train, const TrainOptions& o) {
  Model& model = threaded.model();
  BatchLoader loader(train, o.batch_size);
  loader.reset_in_order();
  const Batch b = loader.next();
  std::vector<float> params = model.params();
  auto opt = make_optimizer(o.optimizer, model.num_params(), o.momentum);
  auto step = [&] {
    threaded.forward_backward(b.x, b.y, b.n, Context{true, 0});
    opt->step(params.data(), model.grads().data(), model.num_params(), o.lr,
              threaded.pool_for_update(b.n));
  };
  step();
  std::vector<double> windows;
  for (int w = 0; w < 5; ++w) {
    const double t0 = seconds_now();
    int reps = 0;
    do step(), ++reps;
    while (seconds_now() - t0 < 0.02);
    windows.push_back((seconds_now() - t0) / reps);
  }
  return median(windows);
}

// Evaluates the parameters `common` on the model, whose own parameters are put back after.
Evaluation validate(ThreadedModel& threaded, const float* common, const Split& val, Comm& comm) {
  std::vector<float>& params = threaded.model().params();
  if (common == params.data()) return evaluate(threaded, val, comm);
  const std::vector<float> own = params;
  std::copy(common, common + params.size(), params.begin());
  const Evaluation v = evaluate(threaded, val, comm);
  std::copy(own.begin(), own.end(), params.begin());
  return v;
}

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

}  // namespace

StepResult train_step(ThreadedModel& threaded, Optimizer& opt, SyncStrategy& sync, const float* x,
                      const int32_t* y, int n, float lr, const Context& ctx, int64_t step,
                      const std::function<void()>& beside_update) {
  Model& model = threaded.model();
  float* grads = model.grads().data();
  StepResult r;
  r.stats = threaded.forward_backward(x, y, n, ctx,
                                      [&](int64_t lo) { sync.gradients_ready(grads, lo, step); });
  r.grads_shared = sync.reduce_gradients(grads, step, opt);
  ThreadPool* update_pool = threaded.pool_for_update(n);
  auto update = [&] {
    r.grads_finite = opt.step(model.params().data(), grads, model.num_params(), lr, update_pool);
  };
  // Where the calling thread updates alone, a worker runs beside_update meanwhile (item 1; item 0
  // stays on the calling thread), unless the cores are crowded: a worker the OS holds back would
  // keep the update waiting.
  ThreadPool& pool = threaded.pool();
  const bool overlapped = beside_update && !update_pool && pool.size() > 1 && !pool.crowded();
  if (overlapped)
    pool.run_on_threads(2, [&](int item, int) { item == 0 ? update() : beside_update(); });
  else
    update();
  sync.after_update(model.params().data(), step);
  if (beside_update && !overlapped) beside_update();
  return r;
}

TrainResult fit(const TrainOptions& o, Comm& comm, std::ostream& out) {
  // Set-up: threads, data, model and optimizer, the sync strategy, the report.
  const double wall0 = seconds_now();
  if (o.expect_ranks > 0 && comm.size() != o.expect_ranks)
    throw UsageError("started as " + std::to_string(comm.size()) + " rank(s), but --expect-ranks " +
                     std::to_string(o.expect_ranks) +
                     ": the launcher did not connect the processes (with srun, "
                     "add --mpi=pmix; with mpirun, give -np " +
                     std::to_string(o.expect_ranks) + ")");
  const int rank = comm.rank(), ranks = comm.size();
  const int threads = o.threads ? o.threads : default_threads();
  ThreadPool pool(threads);
  run_together(comm, [&] {
    if (rank == 0) check_outputs(o);
  });
  // From here on start-up too can stall. FILE.stalled: the ranks that had not arrived, for `pitrain
  // elastic`.
  StallWatchdog watchdog(o.stall_timeout, comm,
                         o.progress_file.empty() ? "" : o.progress_file + ".stalled");
  Run run = start_run(o, comm);
  Model& model = run.model;
  ThreadedModel threaded(model, pool);
  RunState& state = run.state;
  const int64_t largest_slice = (run.train.total_rows + ranks - 1) / ranks;
  const int64_t spe =
      o.steps_per_epoch ? o.steps_per_epoch : (largest_slice + o.batch_size - 1) / o.batch_size;
  threaded.reserve(o.batch_size);
  // A run stopped mid-epoch and resumed with epochs of another length (another number of ranks,
  // as `pitrain elastic` resumes without a lost Pi) goes on from the same share of its epoch.
  if (state.epoch_step && state.steps_per_epoch && state.steps_per_epoch != spe)
    state.epoch_step = (state.epoch_step * spe + state.steps_per_epoch / 2) / state.steps_per_epoch;
  state.steps_per_epoch = spe;
  const std::vector<WireMatrix> matrices = weight_matrices(model);
  comm.connect_all();
  const SyncChoice sync_choice =
      o.sync_auto && ranks > 1 ? auto_sync(comm, o.sync, time_step(threaded, run.train.data, o),
                                           model.num_params(), matrices)
                               : SyncChoice{o.sync, "", ""};
  const float lr = o.lr * sync_choice.opts.inner_lr_scale;
  const LrSchedule schedule{lr, lr * lr_scale(o.lr_scaling, ranks),
                            int64_t(o.warmup_epochs * double(spe))};
  auto sync = make_sync_strategy(comm, model.params().data(), model.num_params(), sync_choice.opts,
                                 matrices);
  BatchLoader loader(run.train.data, o.batch_size);
  const std::string checkpoint = o.checkpoint.empty() ? "pitrain-stopped.h5" : o.checkpoint;
  std::optional<CheckpointWriter> writer;  // rank 0's
  if (rank == 0) writer.emplace(model, *run.opt, run.train.class_names);
  // All ranks learn that rank 0 has its copy of the state (the file follows in the background,
  // and a failed write is reported at the next save), or, with `wait`, that the file is on disk.
  double last_save = seconds_now();
  auto save = [&](const std::string& path, bool wait) {
    run_together(comm, [&] {
      if (rank != 0) return;
      // Finite gradients times a large --lr can still overflow a weight: such a file could not
      // be resumed, so the last good one stays.
      if (!all_finite(model.params().data(), model.num_params()))
        throw Error("step " + std::to_string(state.step) +
                    ": the weights hold NaN or Inf (the steps are too large); lower --lr; " +
                    "not saved (" + path + " is left as it was)");
      writer->save(path, model, *run.opt, state);
      if (wait) writer->wait();
    });
    last_save = seconds_now();
  };
  bool clock_asked = false;  // rank 0 has voted kSaveVote and waits for the vote to come back
  // Asks for a save by the clock only at a step that votes (local SGD: a round's), where the
  // vote is not dropped.
  auto local_vote = [&](int sig, int64_t step) {
    if (sig || rank != 0 || !o.checkpoint_seconds || clock_asked || !sync->votes_at(step) ||
        seconds_now() - last_save < o.checkpoint_seconds)
      return sig;
    clock_asked = true;
    return kSaveVote;
  };
  ProgressFile progress_file(rank == 0 ? o.progress_file : "");
  TrainReport report(
      out, o,
      RunInfo{ranks, threads, run.train.total_rows, run.val.total_rows,
              int64_t(run.train.class_names.size()), model.spec(), model.num_params(), spe,
              run.resumed ? state.step : -1, state.epoch, sync_choice},
      rank == 0);
  StopSignals signals;
  TrainResult result;

  // The loop: epochs of steps; after each, validation, the log and a checkpoint. A checkpoint
  // due by steps or seconds at an epoch's last step is written at its end, after validation.
  for (int epoch = int(state.epoch) + 1; epoch <= o.epochs; ++epoch) {
    const int64_t first_step = std::min(state.epoch_step, spe);
    loader.reset_shuffled(state.seed, rank, epoch, spe, first_step);
    report.start_epoch(epoch, spe);
    EpochMeter meter(comm);
    bool save_due = false;
    // Each step loads the next one's batch (into the same buffers) while it updates the weights.
    Batch b = first_step < spe ? loader.next() : Batch{};
    for (int64_t s = first_step; s < spe; ++s) {
      const int64_t step = state.step;
      watchdog.beat(step);
      const Context ctx{true, rng_key(state.seed, 0xd2, uint64_t(rank), uint64_t(step))};
      const int rows = b.n;
      const auto load_next = [&] { b = loader.next(); };
      const StepResult r =
          train_step(threaded, *run.opt, *sync, b.x, b.y, rows, schedule.at(step), ctx, step,
                     s + 1 < spe ? std::function<void()>(load_next) : nullptr);
      check_finite(model, r, step, epoch, o.checkpoint, rank);
      meter.add(r.stats, rows);
      ++state.step, state.epoch_step = s + 1;
      report.update(s + 1, meter.loss(), meter.accuracy(), meter.seconds(), meter.mpi_share());
      progress_file.update(state.step, seconds_now());
      const int sig = signals.requested()              ? signals.requested()
                      : progress_file.stop_requested() ? SIGTERM
                                                       : 0;
      const int vote = sync->agreed_stop(step, local_vote(sig, step));
      if (vote > kSaveVote) {  // a signal: every rank stops at this step
        sync->agree_final(model.params().data(), step);
        save(checkpoint, true);
        report.stopped(signal_name(vote), state.step, epoch, s + 1, checkpoint);
        throw Stopped{128 + vote};
      }
      if (vote == kSaveVote) clock_asked = false;
      save_due |= vote == kSaveVote ||
                  (o.checkpoint_every_steps && state.step % o.checkpoint_every_steps == 0);
      if (save_due && s + 1 < spe) {
        sync->agree(model.params().data(), step);  // local SGD: the ranks' common model
        save(o.checkpoint, false);
        save_due = false;
      }
    }
    watchdog.beat(state.step);
    // The model itself must be the ranks' common one where it is saved or returned; validation
    // alone takes the last round's common model (local SGD) and lets the ranks go on.
    const bool last = epoch == o.epochs;
    const bool saving =
        !o.checkpoint.empty() && (save_due || epoch % o.checkpoint_every == 0 || last);
    const bool agreed = saving || last;
    float* params = model.params().data();
    if (last)
      sync->agree_final(params, state.step - 1);
    else if (saving)
      sync->agree(params, state.step - 1);
    const float* common = agreed ? params : sync->common_params(params, state.step - 1);
    EpochResult r = meter.result(epoch, spe - first_step, comm);
    r.sync_every = sync->sync_every();
    const Evaluation v = validate(threaded, common, run.val.data, comm);
    r.val_loss = v.loss, r.val_accuracy = v.accuracy;
    report.end_epoch(r);
    result.epochs.push_back(r);
    state.epoch = epoch, state.epoch_step = 0;
    if (saving) save(o.checkpoint, last);
  }
  run_together(comm, [&] {  // an earlier background write's failure, when no save came after it
    if (rank == 0) writer->wait();
  });

  // The report.
  report.finish(state.epoch, state.step, seconds_now() - wall0);
  result.params = model.params();
  return result;
}

}  // namespace pitrain
