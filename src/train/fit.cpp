// The fit loop. Every rank trains on its own slice; gradients meet in one allreduce per step.
#include <chrono>
#include <csignal>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "pitrain/checkpoint.h"
#include "pitrain/error.h"
#include "pitrain/guard.h"
#include "pitrain/image_files.h"
#include "pitrain/matrix.h"
#include "pitrain/rng.h"
#include "pitrain/train.h"

namespace pitrain {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void check_options(const TrainOptions& o) {
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) throw UsageError(msg);
  };
  need(!o.data.empty(), "train: --data FILE.h5 is required (make one with `pitrain prepare`)");
  need(o.epochs > 0, "--epochs must be a positive integer, got " + std::to_string(o.epochs));
  need(o.batch_size > 0, "--batch-size must be a positive integer, got " + std::to_string(o.batch_size));
  need(o.steps_per_epoch >= 0, "--steps-per-epoch must be 0 (one pass) or positive");
  need(o.lr > 0 && std::isfinite(o.lr), "--lr must be a positive number");
  need(o.momentum >= 0 && o.momentum < 1, "--momentum must be in [0, 1)");
  need(o.lr_scaling == "none" || o.lr_scaling == "linear", "--lr-scaling must be none or linear");
  need(o.warmup_epochs >= 0, "--warmup-epochs must be 0 or positive");
  need(o.threads >= 0, "--threads must be 0 (automatic) or positive");
  need(o.checkpoint_every > 0, "--checkpoint-every must be a positive number of epochs");
  need(o.stall_timeout >= 0, "--stall-timeout must be 0 (off) or a positive number of seconds");
}

// Fails early, before any training, when an output file cannot be written.
void check_writable(const std::string& path, const std::string& flag) {
  if (path.empty()) return;
  const std::string probe = path + ".tmp";
  if (!std::ofstream(probe)) throw Error(flag + " " + path + ": cannot write there; check that the folder exists and is writable");
  std::remove(probe.c_str());
}

std::string json_line(const TrainOptions& o, const Comm& comm, const Model& model, int threads, int64_t steps,
                      int64_t spe, double train_s, double wall_s, double mpi_s, int64_t bytes, const EpochResult& last) {
  auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    return std::string(b);
  };
  const double images = double(comm.size()) * o.batch_size * double(steps);
  return std::string("{") + "\"ranks\": " + std::to_string(comm.size()) + ", \"threads\": " + std::to_string(threads) +
         ", \"batch_per_rank\": " + std::to_string(o.batch_size) + ", \"steps\": " + std::to_string(steps) +
         ", \"steps_per_epoch\": " + std::to_string(spe) + ", \"train_seconds\": " + num(train_s) +
         ", \"images_per_second\": " + num(images / train_s) + ", \"ms_per_step\": " + num(1e3 * train_s / double(steps)) +
         ", \"val_accuracy\": " + num(last.val_accuracy) + ", \"val_loss\": " + num(last.val_loss) +
         ", \"params\": " + std::to_string(model.num_params()) + ", \"mpi_seconds\": " + num(mpi_s) +
         ", \"mpi_share\": " + num(mpi_s / train_s) + ", \"bytes_per_step\": " +
         std::to_string(bytes / steps) + ", \"wall_seconds\": " + num(wall_s) +
         ", \"epochs\": " + std::to_string(last.epoch) + ", \"model\": \"" + model.spec() + "\", \"optimizer\": \"" +
         o.optimizer + "\", \"lr\": " + num(o.lr) + ", \"gemm\": \"" + gemm_backend() + "\", \"sync_every\": " + std::to_string(o.sync.sync_every) +
         ", \"grad_dtype\": \"" + wire_type_name(o.sync.wire) +
         "\", \"overlap\": " + (o.sync.overlap ? "true" : "false") + "}";
}

// Stops the job on a NaN or Inf before it reaches a checkpoint. After a gradient average every
// rank holds the same gradients and so finds the same layer: rank 0 alone reports it.
void check_finite(const Model& model, const LossStats& st, bool averaged, int64_t step, int epoch, const TrainOptions& o,
                  int rank) {
  const std::string layer = first_non_finite_layer(model);
  if (layer.empty() && std::isfinite(st.loss_sum)) return;
  const std::string msg =
      "step " + std::to_string(step + 1) + " (epoch " + std::to_string(epoch) + "): " +
      (layer.empty() ? std::string("the loss is not finite") : "the gradients of " + layer + " (the first such layer) hold NaN or Inf") +
      "; lower --lr or check the data" + (o.checkpoint.empty() ? "" : "; " + o.checkpoint + " still holds the last good state");
  if (averaged && !layer.empty()) throw JointError(rank == 0 ? msg : "");
  throw Error(msg);
}

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

}  // namespace

LossStats train_step(Model& model, Optimizer& opt, GradientSync& sync, const float* x, const int32_t* y, int n,
                     float lr, const Context& ctx, int64_t step) {
  float* grads = model.grads().data();
  const bool average = sync.averages_gradients(step);
  const LossStats st = model.forward_backward(x, y, n, ctx, [&](int64_t lo) {
    if (average) sync.gradients_ready(grads, lo);
    else sync.progress();  // a local SGD round in flight
  });
  if (average) sync.finish(grads);
  opt.step(model.params().data(), grads, model.num_params(), lr, average ? 1 : sync.ranks());
  sync.maybe_average_parameters(model.params().data(), step, false);
  return st;
}


TrainResult fit(const TrainOptions& o, Comm& comm, std::ostream& out) {
  check_options(o);
  if (o.expect_ranks > 0 && comm.size() != o.expect_ranks)
    throw UsageError("started as " + std::to_string(comm.size()) + " rank(s), but --expect-ranks " +
                     std::to_string(o.expect_ranks) + ": the launcher did not connect the processes (with srun, "
                     "add --mpi=pmix; with mpirun, give -np " + std::to_string(o.expect_ranks) + ")");
  const double wall0 = now();
  const int rank = comm.rank(), ranks = comm.size();
  const int threads = o.threads ? o.threads
                                : std::max(1, int(std::thread::hardware_concurrency()) / local_ranks());
  set_compute_threads(threads);

  StallWatchdog watchdog(o.stall_timeout, comm);  // from here on: start-up too can stall
  RankSlice train, val;
  std::optional<Checkpoint> ckpt;
  run_together(comm, [&] {
    train = load_rank_slice(o.data, "train", rank, ranks);
    val = load_rank_slice(o.data, "val", rank, ranks);
    if (!o.resume.empty()) {
      ckpt.emplace(load_checkpoint(o.resume));
      if (ckpt->class_names != train.class_names)
        throw Error(o.resume + ": checkpoint classes differ from " + o.data + "'s class_names; resume on the same data");
    }
    if (rank == 0) check_writable(o.checkpoint, "--checkpoint"), check_writable(o.log_csv, "--log");
  });
  const auto& class_names = train.class_names;
  Model model = ckpt ? std::move(ckpt->model) : Model(o.model, int(class_names.size()));
  auto opt = make_optimizer(o.optimizer, model.num_params(), o.momentum);
  RunState state{0, 0, 0, o.seed};
  if (ckpt) {
    restore_optimizer(*ckpt, *opt, o.resume);
    state = ckpt->state;
  } else if (rank == 0) {
    model.init_params(o.seed);
  }
  comm.broadcast(model.params().data(), model.num_params());  // every rank starts from rank 0's weights

  const int64_t largest_slice = (train.total_rows + ranks - 1) / ranks;
  const int64_t spe = o.steps_per_epoch ? o.steps_per_epoch : (largest_slice + o.batch_size - 1) / o.batch_size;
  const float peak_lr = o.lr * (o.lr_scaling == "linear" ? float(ranks) : 1.0f);
  const LrSchedule schedule{o.lr, peak_lr, int64_t(o.warmup_epochs * double(spe))};
  if (rank == 0 && !o.json)
    out << "pitrain: " << ranks << " rank" << (ranks > 1 ? "s" : "") << " x " << threads << " thread"
        << (threads > 1 ? "s" : "") << ", " << train.total_rows << " train / " << val.total_rows << " val images, "
        << class_names.size() << " classes, model " << model.spec() << " (" << model.num_params()
        << " params), batch " << o.batch_size << " a rank (" << o.batch_size * ranks << " global), " << spe
        << " steps an epoch" << (ckpt ? ", resumed after step " + std::to_string(state.step) : "") << "\n"
        << std::flush;

  std::ofstream csv;
  if (rank == 0 && !o.log_csv.empty()) {
    const bool append = ckpt && std::ifstream(o.log_csv).good();
    csv.open(o.log_csv, append ? std::ios::app : std::ios::trunc);
    if (!append) csv << "epoch,loss,accuracy,val_loss,val_accuracy,seconds,mpi_seconds\n";
  }
  const std::string checkpoint_path = o.checkpoint.empty() ? "pitrain-stopped.h5" : o.checkpoint;
  auto save = [&](const std::string& path) {
    run_together(comm, [&] {  // all ranks learn that rank 0's checkpoint is on disk, or why not
      if (rank == 0) save_checkpoint(path, model, *opt, state, class_names);
    });
  };

  GradientSync sync(comm, model.params().data(), model.num_params(), o.sync);
  StopSignals signals;
  StopVote vote(comm);
  model.reserve(o.batch_size);
  std::vector<float> x(size_t(o.batch_size) * kImagePixels);
  std::vector<int32_t> y(static_cast<size_t>(o.batch_size));
  ProgressBar progress(out, rank == 0 && !o.json);
  TrainResult result;
  double train_seconds = 0, train_mpi = 0;
  int64_t train_bytes = 0, steps_run = 0;
  for (int epoch = int(state.epoch) + 1; epoch <= o.epochs; ++epoch) {
    const auto order = epoch_order(train.data.size(), spe * o.batch_size, state.seed, rank, epoch);
    progress.start_epoch(epoch, o.epochs, spe);
    double sums[3] = {0, 0, 0};  // loss sum, correct, images: this rank's, reduced at the epoch end
    const double t0 = now(), mpi0 = comm.mpi_seconds();
    const int64_t bytes0 = comm.bytes_sent(), first_step = std::min(state.epoch_step, spe);
    for (int64_t s = first_step; s < spe; ++s) {
      watchdog.beat(state.step);
      make_batch(train.data, &order[size_t(s * o.batch_size)], o.batch_size, x.data(), y.data());
      const Context ctx{true, rng_key(state.seed, 0xd2, uint64_t(rank), uint64_t(state.step))};
      const LossStats st =
          train_step(model, *opt, sync, x.data(), y.data(), o.batch_size, schedule.at(state.step), ctx, state.step);
      check_finite(model, st, sync.averages_gradients(state.step), state.step, epoch, o, rank);
      sums[0] += st.loss_sum, sums[1] += double(st.correct), sums[2] += o.batch_size;
      const bool communicated = sync.communicates(state.step);
      ++state.step, state.epoch_step = s + 1;
      const double elapsed = now() - t0;
      progress.update(s + 1, sums[0] / sums[2], sums[1] / sums[2], elapsed, (comm.mpi_seconds() - mpi0) / elapsed);
      const int sig = communicated || ranks == 1 ? vote.exchange(signals.requested()) : 0;
      if (sig) {  // every rank agreed at this same step
        sync.maybe_average_parameters(model.params().data(), state.step - 1, true);
        save(checkpoint_path);
        if (rank == 0)
          out << "\npitrain: stopped by " << signal_name(sig) << " after step " << state.step << " (epoch " << epoch
              << ", step " << s + 1 << " of " << spe << "); saved " << checkpoint_path
              << "; continue with the same command plus --resume " << checkpoint_path << std::endl;
        throw Stopped{128 + sig};
      }
    }
    watchdog.beat(state.step);
    sync.maybe_average_parameters(model.params().data(), state.step - 1, true);  // validate the average
    EpochResult r;
    r.epoch = epoch;
    r.seconds = now() - t0;
    r.mpi_seconds = comm.mpi_seconds() - mpi0;
    r.bytes_sent = comm.bytes_sent() - bytes0;
    train_seconds += r.seconds, train_mpi += r.mpi_seconds, train_bytes += r.bytes_sent;
    steps_run += spe - first_step;
    comm.allreduce_sum(sums, 3);
    r.loss = sums[0] / sums[2];
    r.accuracy = sums[1] / sums[2];
    const Evaluation v = evaluate(model, val.data, comm);
    r.val_loss = v.loss, r.val_accuracy = v.accuracy;
    progress.end_epoch(r, spe - first_step);
    result.epochs.push_back(r);
    state.epoch = epoch, state.epoch_step = 0;
    if (rank == 0 && csv.is_open())
      csv << epoch << ',' << r.loss << ',' << r.accuracy << ',' << r.val_loss << ',' << r.val_accuracy << ','
          << r.seconds << ',' << r.mpi_seconds << std::endl;
    if (!o.checkpoint.empty() && (epoch % o.checkpoint_every == 0 || epoch == o.epochs)) save(o.checkpoint);
  }
  if (rank == 0 && !o.checkpoint.empty() && !o.json)
    out << "saved " << o.checkpoint << " (epoch " << state.epoch << ", step " << state.step << ")\n";
  if (rank == 0 && o.json && steps_run > 0)
    out << json_line(o, comm, model, threads, steps_run, spe, train_seconds, now() - wall0, train_mpi,
                     train_bytes, result.epochs.back())
        << "\n";
  result.params = model.params();
  return result;
}

}  // namespace pitrain
