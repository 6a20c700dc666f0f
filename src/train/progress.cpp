// Keras-style progress: "Epoch 3/32" then
// "256/256 [==============================] - 4s 15ms/step - loss: 0.6100 - accuracy: 0.8200 ...".
#include "pitrain/progress.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <iostream>

#include "pitrain/clock.h"
#include "pitrain/error.h"
#include "pitrain/matrix.h"
#include "pitrain/paths.h"
#include "pitrain/text.h"

namespace pitrain {
namespace {

// Open MPI gives every rank a pseudo-terminal whatever mpirun's own output is, so under mpirun
// ask where the parent's (mpirun's) stdout goes. Remote ranks never draw a live bar.
bool stdout_is_terminal() {
  if (!isatty(STDOUT_FILENO)) return false;
  if (!std::getenv("OMPI_COMM_WORLD_SIZE")) return true;
  char target[256] = {};
  const std::string link = "/proc/" + std::to_string(getppid()) + "/fd/1";
  if (readlink(link.c_str(), target, sizeof target - 1) < 0) return false;
  return std::strncmp(target, "/dev/pts/", 9) == 0 || std::strncmp(target, "/dev/tty", 8) == 0;
}

std::string metrics(double loss, double acc) {
  return " - loss: " + format_number("%.4f", loss) + " - accuracy: " + format_number("%.4f", acc);
}

std::string bytes_text(double b) {
  return b >= 1e6   ? format_number("%.1fMB", b / 1e6)
         : b >= 1e3 ? format_number("%.0fKB", b / 1e3)
                    : format_number("%.0fB", b);
}

std::string plural(int64_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n > 1 ? "s" : "");
}

// seconds: the epoch's training, the slowest rank's; wall_seconds: the job's so far, start-up
// included and validation not (the time axis for time to a target accuracy).
constexpr const char* kCsvHeader =
    "epoch,loss,accuracy,val_loss,val_accuracy,seconds,mpi_seconds,images,wall_seconds";

// The log's header and its rows of epochs up to `epochs` (a killed run may have logged epochs
// that its checkpoint does not hold), and the last kept row's wall_seconds; empty if `path` is
// not such a log.
std::string log_rows_up_to(const std::string& path, int64_t epochs, double& wall_seconds) {
  std::ifstream in(path);
  std::string line, kept;
  if (!std::getline(in, line) || line != kCsvHeader) return kept;
  kept = line + "\n";
  while (std::getline(in, line)) {
    char* end = nullptr;
    const long long epoch = std::strtoll(line.c_str(), &end, 10);
    if (end == line.c_str() || epoch > epochs) continue;
    kept += line + "\n";
    wall_seconds = std::strtod(line.c_str() + line.rfind(',') + 1, nullptr);
  }
  return kept;
}

}  // namespace

TrainReport::TrainReport(std::ostream& out, const TrainOptions& opts, const RunInfo& run,
                         bool speaks)
    : out_(out),
      opts_(opts),
      run_(run),
      speaks_(speaks),
      progress_(speaks && !opts.json),
      live_(progress_ && stdout_is_terminal()) {
  if (speaks && !opts.log_csv.empty()) {
    // A resume keeps a log file's rows up to its checkpoint, rewritten beside it and renamed into
    // place (a crash leaves the old log whole); a device or pipe (/dev/stdout) is written as it is.
    std::error_code not_a_file;
    const std::string kept =
        run.resumed_after_step >= 0 && std::filesystem::is_regular_file(opts.log_csv, not_a_file)
            ? log_rows_up_to(opts.log_csv, run.resumed_epochs, wall_before_)
            : "";
    if (!kept.empty()) {
      write_file_atomically(opts.log_csv, kept);
      csv_.open(opts.log_csv, std::ios::app);
    } else {
      csv_.open(opts.log_csv, std::ios::trunc);
      csv_ << kCsvHeader << "\n";
    }
    if (!csv_) throw Error("--log " + opts.log_csv + ": cannot write it; check its permissions");
  }
  wall_before_ += run.startup_seconds;
  if (!progress_) return;
  out_ << "pitrain: " << plural(run.ranks, "rank") << " x " << plural(run.threads, "thread") << ", "
       << run.train_images << " train / " << run.val_images << " val images, " << run.classes
       << " classes, model " << run.model_spec << " (" << run.params << " params), batch "
       << opts.batch_size << " a rank (" << opts.batch_size * run.ranks << " global), "
       << run.steps_per_epoch << " steps an epoch"
       << (run.resumed_after_step >= 0
               ? ", resumed after step " + std::to_string(run.resumed_after_step)
               : "")
       << "\n"
       << "data: " << run.data << "\n"
       << (run.threads > 1 ? "threads: crowded cores " + run.cores + "\n" : "")
       << (run.sync.why.empty() ? "" : "sync auto: " + run.sync.why + "\n")
       << "start-up: " << format_number("%.2f", run.startup_seconds)
       << " s to the first step (the slowest rank's)\n"
       << std::flush;
}

std::string TrainReport::bar(int64_t step) const {
  const int width = 30, done = int(width * step / std::max<int64_t>(steps_, 1));
  std::string b = std::to_string(step) + "/" + std::to_string(steps_) + " [";
  b += std::string(size_t(std::max(done - 1, 0)), '=');
  if (done > 0) b += step == steps_ ? '=' : '>';
  return b + std::string(size_t(width - done), '.') + "]";
}

void TrainReport::start_epoch(int epoch, int64_t steps) {
  epoch_ = epoch, steps_ = steps, last_draw_ = -1;
  if (live_) out_ << "Epoch " << epoch << "/" << opts_.epochs << "\n" << std::flush;
}

void TrainReport::update(int64_t step, double loss, double accuracy, double seconds,
                         double mpi_share) {
  if (!live_ || (seconds - last_draw_ < 0.1 && step < steps_)) return;
  last_draw_ = seconds;
  const double eta = seconds / double(step) * double(steps_ - step);
  out_ << "\r" << bar(step) << " - ETA: " << format_number("%.0fs", eta) << metrics(loss, accuracy)
       << " - mpi: " << format_number("%.0f%%", 100 * mpi_share) << "\033[K" << std::flush;
}

void TrainReport::end_epoch(const EpochResult& r) {
  last_ = r;
  train_seconds_ += r.seconds, mpi_seconds_ += r.mpi_seconds, bytes_ += r.bytes_sent,
      collectives_ += r.collectives, steps_run_ += r.steps;
  // A run stopped after an epoch's last step resumes into that epoch's validation alone: it has
  // no training figures of its own (empty in the CSV), only the validation's.
  const bool trained = r.steps > 0;
  if (csv_.is_open()) {
    csv_ << r.epoch << ',';
    if (trained)
      csv_ << r.loss << ',' << r.accuracy << ',';
    else
      csv_ << ",,";
    csv_ << r.val_loss << ',' << r.val_accuracy << ',' << r.seconds << ',' << r.mpi_seconds << ','
         << r.steps * opts_.batch_size * run_.ranks << ',' << wall_before_ + train_seconds_
         << std::endl;
    if (!csv_) {  // the log is for watching the run, never a reason to stop it
      std::cerr << "pitrain: warning: --log " << opts_.log_csv << ": cannot write epoch " << r.epoch
                << "'s row (a full disk?); training goes on without the log" << std::endl;
      csv_.close();
    }
  }
  if (!progress_) return;
  const std::string training =
      trained ? " - " + format_number("%.0fs", r.seconds) + " " +
                    format_number("%.0fms/step", 1e3 * r.seconds / double(r.steps)) +
                    metrics(r.loss, r.accuracy)
              : "";
  const std::string traffic =
      trained ? " - mpi: " + format_number("%.0f%%", 100 * r.mpi_seconds / r.seconds) + " " +
                    bytes_text(double(r.bytes_sent) / double(r.steps)) + "/step"
              : "";
  const std::string line =
      bar(r.steps) + training + " - val_loss: " + format_number("%.4f", r.val_loss) +
      " - val_accuracy: " + format_number("%.4f", r.val_accuracy) + traffic +
      (r.sync_every > 1 ? " - sync every " + std::to_string(r.sync_every) : "");
  if (live_)
    out_ << "\r" << line << "\033[K\n";
  else
    out_ << "Epoch " << epoch_ << "/" << opts_.epochs << "  " << line << "\n";
  out_ << std::flush;
}

void TrainReport::stopped(const char* signal, int64_t step, int epoch, int64_t epoch_step,
                          const std::string& checkpoint) {
  if (!speaks_) return;
  (opts_.json ? std::cerr : out_) << "\npitrain: stopped by " << signal << " after step " << step
                                  << " (epoch " << epoch << ", step " << epoch_step << " of "
                                  << run_.steps_per_epoch << "); saved " << checkpoint
                                  << "; continue with the same command plus --resume " << checkpoint
                                  << std::endl;
}

void TrainReport::finish(int64_t epoch, int64_t step, double crowded_share) {
  if (progress_ && !opts_.checkpoint.empty())
    out_ << "saved " << opts_.checkpoint << " (epoch " << epoch << ", step " << step << ")\n";
  if (!speaks_ || !opts_.json) return;
  const double images = double(run_.ranks) * opts_.batch_size * double(steps_run_);
  // null where nothing was trained (a run resumed into its last epoch's validation alone)
  auto per = [&](double a, double b) {
    return steps_run_ > 0 && b > 0 ? nlohmann::json(a / b) : nlohmann::json(nullptr);
  };
  const nlohmann::ordered_json j = {
      {"ranks", run_.ranks},
      {"threads", run_.threads},
      {"cores", run_.cores},
      {"data", run_.data},
      {"crowded_share", crowded_share},
      {"batch_per_rank", opts_.batch_size},
      {"steps", steps_run_},
      {"steps_per_epoch", run_.steps_per_epoch},
      {"train_seconds", train_seconds_},
      {"images_per_second", per(images, train_seconds_)},
      {"ms_per_step", per(1e3 * train_seconds_, double(steps_run_))},
      {"val_accuracy", last_.val_accuracy},
      {"val_loss", last_.val_loss},
      {"params", run_.params},
      {"mpi_seconds", mpi_seconds_},
      {"mpi_share", per(mpi_seconds_, train_seconds_)},
      {"bytes_per_step", per(double(bytes_), double(steps_run_))},
      {"allreduces_per_step", per(double(collectives_), double(steps_run_))},
      {"startup_seconds", run_.startup_seconds},
      // rank 0's, from the job's start (PITRAIN_JOB_START) or its launch to now: validation and
      // the checkpoint included
      {"job_seconds", seconds_now() - launcher_start_seconds().value_or(process_start_seconds)},
      {"epochs", last_.epoch},
      {"model", run_.model_spec},
      {"optimizer", opts_.optimizer},
      // As given, not float's 0.0010000000474974513.
      {"lr", std::stod(format_number("%.6g", opts_.lr))},
      {"gemm", gemm_backend()},
      {"sync", opts_.sync_auto ? "auto" : run_.sync.opts.strategy},
      {"strategy", run_.sync.opts.strategy},
      {"sync_every", run_.sync.opts.sync_every},
      {"sync_every_last", last_.sync_every},
      {"grad_dtype", wire_type_name(run_.sync.opts.wire)},
      {"error_feedback", run_.sync.opts.error_feedback},
      {"overlap", run_.sync.opts.overlap},
      {"overlap_steps", run_.sync.opts.overlap_steps},
      {"outer_lr", std::stod(format_number("%.6g", run_.sync.opts.outer_lr))},
      {"outer_momentum", std::stod(format_number("%.6g", run_.sync.opts.outer_momentum))},
      {"inner_lr_scale", std::stod(format_number("%.6g", run_.sync.opts.inner_lr_scale))},
      {"sync_reason", run_.sync.why},
      {"allreduce", run_.sync.allreduce},
  };
  out_ << json_text(j) << "\n";
}

void ProgressFile::update(int64_t step, double seconds_now) {
  if (path_.empty() || seconds_now - last_write_ < 0.1) return;
  last_write_ = seconds_now;
  write_file_atomically(path_, std::to_string(step) + "\n", false);
  stop_ = access((path_ + ".stop").c_str(), F_OK) == 0;
}

}  // namespace pitrain
