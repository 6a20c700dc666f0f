// What a training run tells the user, all from rank 0: the banner, Keras-style progress (a
// live bar on a terminal, one line an epoch otherwise), the --log CSV, and with --json one line
// of machine-readable figures at the end instead of the progress output.
#pragma once
#include <cstdint>
#include <fstream>
#include <iosfwd>
#include <string>
#include <utility>

#include "pitrain/fit.h"

namespace pitrain {

// The facts of a run that the banner and the JSON line describe.
struct RunInfo {
  int ranks = 1, threads = 1;
  std::string cores;  // how the thread pool decides that the cores are crowded (cores_text)
  std::string data;   // where the training rows are: in memory, or streamed in windows
  int64_t train_images = 0, val_images = 0, classes = 0;
  std::string model_spec;
  int64_t params = 0;
  int64_t steps_per_epoch = 0;
  int64_t resumed_after_step = -1;  // -1: a fresh run
  int64_t resumed_epochs = 0;       // the epochs the resumed checkpoint had finished
  SyncChoice sync;                  // how the ranks meet; why, with --sync auto
  double startup_seconds = 0;       // the slowest rank's, from its launch to the first step
};

class TrainReport {
 public:
  // `speaks`: this rank reports (rank 0; the others stay silent). Prints the banner; opens the
  // CSV log, appending when the run resumes and the log exists (its rows of epochs past the
  // checkpoint's, trained again now, are dropped).
  TrainReport(std::ostream& out, const TrainOptions& opts, const RunInfo& run, bool speaks);
  void start_epoch(int epoch, int64_t steps);
  void update(int64_t step, double loss, double accuracy, double seconds, double mpi_share);
  void end_epoch(const EpochResult& r);  // the epoch's line and CSV row
  // On stdout, or with --json on stderr (stdout holds the JSON line alone).
  void stopped(const char* signal, int64_t step, int epoch, int64_t epoch_step,
               const std::string& checkpoint);
  // "saved ..." or the JSON line; crowded_share: ThreadedModel::crowded_share().
  void finish(int64_t epoch, int64_t step, double crowded_share);

 private:
  std::string bar(int64_t step) const;
  std::ostream& out_;
  const TrainOptions& opts_;
  RunInfo run_;
  bool speaks_, progress_, live_;  // progress_: not --json; live_: redraw a bar on a terminal
  std::ofstream csv_;
  int epoch_ = 0;
  int64_t steps_ = 0;
  double last_draw_ = -1;
  EpochResult last_;
  double train_seconds_ = 0, mpi_seconds_ = 0;  // over the epochs this run trained
  // The job's seconds before this run's first epoch: the resumed log's last wall_seconds and this
  // run's start-up. The log's wall_seconds are it plus train_seconds_.
  double wall_before_ = 0;
  int64_t bytes_ = 0, collectives_ = 0, steps_run_ = 0;
};

// For `pitrain elastic` (--progress-file): rank 0 rewrites the file with the steps taken, at
// the first step and then at most ten times a second (a cheap write each), through a temporary file
// and a rename, so a reader never sees half a number. A write that fails is tried again later: the
// file is for watching the run, never a reason to stop it. The same channel runs back: once
// FILE.stop exists (elastic makes it to take a host back or on Ctrl-C), stop_requested() is true
// and rank 0 votes for a stop with a checkpoint, as on SIGTERM. mpirun's own signal forwarding is
// no substitute: with a grace period long enough for the checkpoint, mpirun waits all of it even
// after the ranks are gone. The stall watchdog writes FILE.stalled (StallWatchdog).
class ProgressFile {
 public:
  explicit ProgressFile(std::string path) : path_(std::move(path)) {}
  void update(int64_t step, double seconds_now);
  bool stop_requested() const { return stop_; }

 private:
  std::string path_;  // "": off
  double last_write_ = -1e300;
  bool stop_ = false;
};

}  // namespace pitrain
