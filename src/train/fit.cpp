// The fit loop, as llm.c's: set-up, the loop, the report. Every rank trains on its own slice;
// the sync strategy decides how the ranks' models meet.
#include "pitrain/fit.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>

#include "pitrain/checkpoint.h"
#include "pitrain/clock.h"
#include "pitrain/error.h"
#include "pitrain/evaluate.h"
#include "pitrain/finite.h"
#include "pitrain/guard.h"
#include "pitrain/host_health.h"
#include "pitrain/run_control.h"
#include "pitrain/memory.h"
#include "pitrain/paths.h"
#include "pitrain/threaded_model.h"
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
// or makes fresh weights from the seed on every rank; then every rank starts from rank 0's. Only
// rank 0 reads the checkpoint: on Pis it is on rank 0's disk alone (pitrain elastic restarts on
// other hosts), so the others take its model, run state and optimizer state from rank 0.
Run start_run(const TrainOptions& o, Comm& comm) {
  RankSlice train, val;
  std::optional<Checkpoint> ckpt;  // rank 0's
  std::string spec = o.model;
  run_together(comm, [&] {
    // Three quarters of --data-memory for the training rows, a quarter for validation's.
    train = load_rank_slice(o.data, "train", comm.rank(), comm.size(), o.data_memory / 4 * 3);
    val = load_rank_slice(o.data, "val", comm.rank(), comm.size(), o.data_memory / 4);
    if (val.data.shape != train.data.shape)
      throw Error(o.data + ": /val holds images of " + shape_text(val.data.shape) + ", /train of " +
                  shape_text(train.data.shape) +
                  "; prepare the file again from images of one shape");
    if (!o.resume.empty() && comm.rank() == 0) {
      ckpt.emplace(load_checkpoint(o.resume, o.batch_size));
      if (ckpt->class_names != train.class_names)
        throw Error(o.resume + ": checkpoint classes differ from " + o.data +
                    "'s class_names; resume on the same data");
      if (ckpt->model.input_shape() != train.data.shape)
        throw Error(o.resume + ": checkpoint takes images of " +
                    shape_text(ckpt->model.input_shape()) + ", " + o.data + " holds " +
                    shape_text(train.data.shape) + "; resume on the same data");
      if (!o.model.empty() &&
          Model(o.model, int(train.class_names.size()), train.data.shape).spec() !=
              ckpt->model.spec())
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
    model.emplace(ckpt ? std::move(ckpt->model)
                       : Model(spec, int(train.class_names.size()), train.data.shape));
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
    comm.broadcast(model->params().data(), model->num_params());
  } else {
    // Every rank draws the weights from the seed, which spares the start-up a broadcast of them
    // all (a second on a WLAN); where a rank drew other floats (a machine of another kind),
    // rank 0's are sent.
    model->init_params(o.seed);
    if (!comm.all_equal(hash_bytes(model->params().data(), model->params().size() * sizeof(float))))
      comm.broadcast(model->params().data(), model->num_params());
  }
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
    ++steps_;
  }
  double loss() const { return sums_[0] / sums_[2]; }
  double accuracy() const { return sums_[1] / sums_[2]; }
  double seconds() const { return seconds_now() - t0_; }
  double mpi_share() const { return (comm_.mpi_seconds() - mpi0_) / seconds(); }
  // Call after the epoch's last wait on the other ranks (a round's, or the final agreement):
  // the epoch's seconds are the slowest rank's, as the job's clock sees them.
  EpochResult result(int epoch, Comm& comm) {
    EpochResult r;
    r.epoch = epoch, r.steps = steps_;
    r.seconds = seconds();
    r.mpi_seconds = comm.mpi_seconds() - mpi0_;
    r.bytes_sent = comm.bytes_sent() - bytes0_;
    r.collectives = comm.collectives() - calls0_;
    r.seconds = slowest_rank_seconds(comm, r.seconds);
    comm.allreduce_sum(sums_, 3);
    r.loss = loss(), r.accuracy = accuracy();
    return r;
  }

 private:
  const Comm& comm_;
  double t0_, mpi0_;
  int64_t bytes0_, calls0_;
  int64_t steps_ = 0;           // run in this epoch (fewer after a resume mid-epoch)
  double sums_[3] = {0, 0, 0};  // loss sum, correct, images
};

// Seconds of a training step on this rank's first batch, without the sync: forward, backward and
// the optimizer's update (on copies of the weights and a fresh optimizer, which the run does not
// see), after one to warm up. What --sync auto weighs the link against. The median of three
// windows, each the mean over at least 20 ms (a CPU quota, as on the emulated hosts, lets a
// short burst run at full speed: two of their 10 ms periods). One long window may read a step
// many times too long on an emulated host still busy from start-up, and the run would then take
// full-rank rounds that reach the target far later (bench/cluster.sh).
double time_step(ThreadedModel& threaded, const RankSlice& train, const TrainOptions& o) {
  Model& model = threaded.model();
  const Split first = first_rows(train, o.batch_size);
  BatchLoader loader(first, o.batch_size);
  loader.reset_in_order();
  const Batch b = loader.next();
  std::vector<float> params = model.params();
  auto opt = make_optimizer(o.optimizer, model.num_params(), o.momentum);
  auto step = [&] {
    threaded.forward_backward(b.x, b.y, b.n, Context{true, 0});
    opt->step(params.data(), model.grads().data(), model.num_params(), o.lr, &threaded.pool());
  };
  step();
  std::vector<double> windows;
  for (int w = 0; w < 3; ++w) {
    const double t0 = seconds_now();
    int reps = 0;
    do step(), ++reps;
    while (seconds_now() - t0 < 0.02);
    windows.push_back((seconds_now() - t0) / reps);
  }
  return median(windows);
}

// Evaluates the parameters `common` on the model, whose own parameters are put back after.
Evaluation validate(ThreadedModel& threaded, const float* common, const RankSlice& val, Comm& comm,
                    const std::function<void()>& each_batch) {
  std::vector<float>& params = threaded.model().params();
  if (common == params.data()) return evaluate(threaded, val, comm, each_batch);
  const std::vector<float> own = params;
  std::copy(common, common + params.size(), params.begin());
  const Evaluation v = evaluate(threaded, val, comm, each_batch);
  std::copy(own.begin(), own.end(), params.begin());
  return v;
}

// Fails at once where the launcher did not start the ranks --expect-ranks asks for.
void check_expected_ranks(const TrainOptions& o, const Comm& comm) {
  if (o.expect_ranks > 0 && comm.size() != o.expect_ranks)
    throw UsageError("started as " + std::to_string(comm.size()) + " rank(s), but --expect-ranks " +
                     std::to_string(o.expect_ranks) +
                     ": the launcher did not connect the processes (with srun, "
                     "add --mpi=pmix; with mpirun, give -np " +
                     std::to_string(o.expect_ranks) + ")");
}

// Rank 0's check_outputs() failure, to be thrown on every rank once the watchdog runs.
std::exception_ptr output_error(const TrainOptions& o, const Comm& comm) {
  try {
    if (comm.rank() == 0) check_outputs(o);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// Steps an epoch: --steps-per-epoch, or one pass over the largest rank slice. A run stopped
// mid-epoch and resumed with epochs of another length (another number of ranks, as `pitrain
// elastic` resumes without a lost Pi) goes on from the same share of its epoch.
int64_t set_steps_per_epoch(const TrainOptions& o, int ranks, Run& run) {
  const int64_t largest_slice = (run.train.total_rows + ranks - 1) / ranks;
  const int64_t spe =
      o.steps_per_epoch ? o.steps_per_epoch : (largest_slice + o.batch_size - 1) / o.batch_size;
  RunState& state = run.state;
  if (state.epoch_step && state.steps_per_epoch && state.steps_per_epoch != spe)
    state.epoch_step = (state.epoch_step * spe + state.steps_per_epoch / 2) / state.steps_per_epoch;
  state.steps_per_epoch = spe;
  return spe;
}

// --sync auto's choice on several ranks, or the strategy the options name.
SyncChoice choose_run_sync(const TrainOptions& o, Comm& comm, ThreadedModel& threaded,
                           const Run& run, const std::vector<WireMatrix>& matrices) {
  if (!o.sync_auto || comm.size() == 1) return SyncChoice{o.sync, "", ""};
  return auto_sync(comm, o.sync, time_step(threaded, run.train, o), run.model.num_params(),
                   matrices);
}

// Seconds from the slowest rank's launch to now, its first step: MPI's start-up, connections,
// data, and --sync auto's timing. With the job's start from the launcher (PITRAIN_JOB_START), from
// there to the end of this agreement, which waits for the slowest rank, if that is longer: the
// processes' launch counts too, on this rank's clock (rank 0's is the one reported).
double startup_seconds(Comm& comm) {
  double seconds = seconds_now() - process_start_seconds;
  comm.allreduce_max(&seconds, 1);
  if (const auto start = launcher_start_seconds())
    seconds = std::max(seconds, seconds_now() - *start);
  return seconds;
}

// What the banner and the JSON line say about the run.
RunInfo run_info(const Run& run, Comm& comm, const ThreadPool& pool, int64_t spe,
                 const SyncChoice& choice) {
  const int ranks = comm.size();
  return RunInfo{ranks,
                 pool.size(),
                 pool.cores_text(),
                 slice_text(run.train),
                 run.train.total_rows,
                 run.val.total_rows,
                 int64_t(run.train.class_names.size()),
                 run.model.spec(),
                 run.model.num_params(),
                 spe,
                 run.resumed ? run.state.step : -1,
                 run.state.epoch,
                 choice,
                 startup_seconds(comm)};
}

// The loop's parts, made by fit()'s set-up.
struct Loop {
  const TrainOptions& o;
  Comm& comm;
  Run& run;
  ThreadedModel& threaded;
  SyncStrategy& sync;
  RunControl& control;
  StallWatchdog& watchdog;
  TrainReport& report;
  HostHealth& health;
  LrSchedule schedule;
  int64_t spe;  // steps an epoch
  BatchLoader loader;
};

// The steps of `epoch` from where the run stands. True where a checkpoint by steps or seconds
// fell on its last step: end_epoch() writes it, after validation.
bool train_epoch(Loop& l, int epoch, EpochMeter& meter) {
  RunState& state = l.run.state;
  const int rank = l.comm.rank();
  const int64_t first_step = std::min(state.epoch_step, l.spe);
  l.loader.reset_shuffled(state.seed, rank, epoch, l.spe, first_step);
  l.report.start_epoch(epoch, l.spe);
  bool save_due = false;
  for (int64_t s = first_step; s < l.spe; ++s) {
    const int64_t step = state.step;
    l.watchdog.beat(step);
    const Context ctx{true, rng_key(state.seed, 0xd2, uint64_t(rank), uint64_t(step))};
    const Batch b = l.loader.next();
    const StepResult r =
        train_step(l.threaded, *l.run.opt, l.sync, b.x, b.y, b.n, l.schedule.at(step), ctx, step);
    check_finite(l.run.model, r, step, epoch, l.o.checkpoint, rank);
    meter.add(r.stats, b.n);
    ++state.step, state.epoch_step = s + 1;
    l.report.update(s + 1, meter.loss(), meter.accuracy(), meter.seconds(), meter.mpi_share());
    const StepDecision d = l.control.after_step(step);
    if (d.stop) l.control.stop(d.stop, epoch, l.report);
    save_due |= d.save;
    if (save_due && s + 1 < l.spe) {
      l.sync.agree(l.run.model.params().data(), step);  // local SGD: the ranks' common model
      l.control.save(l.o.checkpoint, false);
      save_due = false;
    }
  }
  l.watchdog.beat(state.step);
  return save_due;
}

// The end of `epoch`: validation, the report and the log, and a checkpoint. The model itself
// must be the ranks' common one where it is saved or returned; validation alone takes the last
// round's common model (local SGD) and lets the ranks go on.
EpochResult end_epoch(Loop& l, int epoch, EpochMeter& meter, bool save_due) {
  RunState& state = l.run.state;
  const bool last = epoch == l.o.epochs;
  const bool saving = l.control.saves_at_end(epoch, save_due);
  float* params = l.run.model.params().data();
  if (last)
    l.sync.agree_final(params, state.step - 1);
  else if (saving)
    l.sync.agree(params, state.step - 1);
  // Local SGD: waits for a round still in flight, inside the epoch's time.
  const float* common = saving || last ? params : l.sync.common_params(params, state.step - 1);
  EpochResult r = meter.result(epoch, l.comm);
  r.sync_every = l.sync.sync_every();
  const Evaluation v =
      validate(l.threaded, common, l.run.val, l.comm, [&] { l.watchdog.beat(state.step); });
  r.val_loss = v.loss, r.val_accuracy = v.accuracy;
  l.report.end_epoch(r);
  l.health.warn_once(std::cerr, l.comm.rank());
  state.epoch = epoch, state.epoch_step = 0;
  if (saving) l.control.save(l.o.checkpoint, last);
  return r;
}

}  // namespace

double slowest_rank_seconds(Comm& comm, double seconds) {
  comm.allreduce_max(&seconds, 1);
  return seconds;
}

StepResult train_step(ThreadedModel& threaded, Optimizer& opt, SyncStrategy& sync, const float* x,
                      const int32_t* y, int n, float lr, const Context& ctx, int64_t step) {
  Model& model = threaded.model();
  float* grads = model.grads().data();
  StepResult r;
  r.stats = threaded.forward_backward(x, y, n, ctx,
                                      [&](int64_t lo) { sync.gradients_ready(grads, lo, step); });
  r.grads_shared = sync.reduce_gradients(grads, step, opt);
  // By ranges on the pool's threads (and a batch that is not cut splits Dense's kernel rows across
  // them likewise, so that each range is in the cache of the core that updates it).
  r.grads_finite = opt.step(model.params().data(), grads, model.num_params(), lr, &threaded.pool());
  sync.after_update(model.params().data(), step);
  return r;
}

TrainResult fit(const TrainOptions& o, Comm& comm, std::ostream& out) {
  // Set-up: threads, data, model and optimizer, the sync strategy, run control, the report.
  check_expected_ranks(o, comm);
  ThreadPool pool(o.threads ? o.threads : default_threads());
  // Rank 0 checks its outputs before the watchdog writes FILE.stalled (the ranks that had not
  // arrived, for `pitrain elastic`) beside the progress file; the failure is shared after it
  // starts, since the first collective already stalls on a rank cut off from the others.
  const std::exception_ptr bad_outputs = output_error(o, comm);
  StallWatchdog watchdog(
      o.stall_timeout, comm,
      o.progress_file.empty() || bad_outputs ? "" : o.progress_file + ".stalled");
  run_together(comm, [&] {
    if (bad_outputs) std::rethrow_exception(bad_outputs);
    launcher_start_seconds();  // a malformed PITRAIN_JOB_START, on any rank, stops them all
  });
  Run run = start_run(o, comm);
  ThreadedModel threaded(run.model, pool);
  threaded.reserve(o.batch_size);
  const int64_t spe = set_steps_per_epoch(o, comm.size(), run);
  const std::vector<WireMatrix> matrices = weight_matrices(run.model);
  comm.connect_all();
  const SyncChoice choice = choose_run_sync(o, comm, threaded, run, matrices);
  auto sync = make_sync_strategy(comm, run.model.params().data(), run.model.num_params(),
                                 choice.opts, matrices);
  RunControl control(o, comm, *sync, run.model, *run.opt, run.state, run.train.class_names);
  TrainReport report(out, o, run_info(run, comm, pool, spe, choice), comm.rank() == 0);
  HostHealth health;
  const float lr = o.lr * choice.opts.inner_lr_scale;
  Loop loop{o,
            comm,
            run,
            threaded,
            *sync,
            control,
            watchdog,
            report,
            health,
            LrSchedule{lr, lr * lr_scale(o.lr_scaling, comm.size()),
                       int64_t(o.warmup_epochs * double(spe))},
            spe,
            BatchLoader(run.train, o.batch_size)};
  TrainResult result;

  // The loop: epochs of steps; after each, validation, the log and a checkpoint.
  for (int epoch = int(run.state.epoch) + 1; epoch <= o.epochs; ++epoch) {
    EpochMeter meter(comm);
    const bool save_due = train_epoch(loop, epoch, meter);
    result.epochs.push_back(end_epoch(loop, epoch, meter, save_due));
  }
  control.finish();

  // The report.
  report.finish(run.state.epoch, run.state.step, threaded.crowded_share());
  result.params = run.model.params();
  return result;
}

}  // namespace pitrain
