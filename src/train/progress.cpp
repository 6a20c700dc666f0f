// Keras-style progress: "Epoch 3/32" then
// "256/256 [==============================] - 4s 15ms/step - loss: 0.6100 - accuracy: 0.8200 ...".
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>

#include "pitrain/train.h"

namespace pitrain {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

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

std::string metrics(double loss, double acc) { return " - loss: " + fmt("%.4f", loss) + " - accuracy: " + fmt("%.4f", acc); }

}  // namespace

ProgressBar::ProgressBar(std::ostream& out, bool enabled)
    : out_(out), enabled_(enabled), live_(enabled && stdout_is_terminal()) {}

std::string ProgressBar::bar(int64_t step) const {
  const int width = 30, done = int(width * step / std::max<int64_t>(steps_, 1));
  std::string b = std::to_string(step) + "/" + std::to_string(steps_) + " [";
  b += std::string(size_t(std::max(done - 1, 0)), '=');
  if (done > 0) b += step == steps_ ? '=' : '>';
  return b + std::string(size_t(width - done), '.') + "]";
}

void ProgressBar::start_epoch(int epoch, int epochs, int64_t steps) {
  epoch_ = epoch, epochs_ = epochs, steps_ = steps, last_draw_ = -1;
  if (live_) out_ << "Epoch " << epoch << "/" << epochs << "\n" << std::flush;
}

void ProgressBar::update(int64_t step, double loss, double accuracy, double seconds, double mpi_share) {
  if (!live_ || (seconds - last_draw_ < 0.1 && step < steps_)) return;
  last_draw_ = seconds;
  const double eta = seconds / double(step) * double(steps_ - step);
  out_ << "\r" << bar(step) << " - ETA: " << fmt("%.0fs", eta) << metrics(loss, accuracy)
       << " - mpi: " << fmt("%.0f%%", 100 * mpi_share) << "\033[K" << std::flush;
}

namespace {

std::string bytes_text(double b) {
  return b >= 1e6 ? fmt("%.1fMB", b / 1e6) : b >= 1e3 ? fmt("%.0fKB", b / 1e3) : fmt("%.0fB", b);
}

}  // namespace

void ProgressBar::end_epoch(const EpochResult& r, int64_t steps) {
  if (!enabled_) return;
  const double mpi_share = r.mpi_seconds / r.seconds;
  const std::string line = bar(steps) + " - " + fmt("%.0fs", r.seconds) + " " +
                           fmt("%.0fms/step", 1e3 * r.seconds / double(steps)) + metrics(r.loss, r.accuracy) +
                           " - val_loss: " + fmt("%.4f", r.val_loss) + " - val_accuracy: " + fmt("%.4f", r.val_accuracy) +
                           " - mpi: " + fmt("%.0f%%", 100 * mpi_share) + " " +
                           bytes_text(double(r.bytes_sent) / double(steps)) + "/step";
  if (live_)
    out_ << "\r" << line << "\033[K\n";
  else
    out_ << "Epoch " << epoch_ << "/" << epochs_ << "  " << line << "\n";
  out_ << std::flush;
}

}  // namespace pitrain
