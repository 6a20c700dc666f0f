// The supervisor's loop: launch mpirun, watch the steps rank 0 reports (--progress-file), and
// when the job ends early, ask which hosts answer and resume from the checkpoint on those.
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <thread>
#include <tuple>

#include "pitrain/checkpoint.h"
#include "pitrain/clock.h"
#include "pitrain/elastic.h"
#include "pitrain/error.h"
#include "pitrain/paths.h"

namespace pitrain {
namespace {

volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_signal(int sig) { g_signal = sig; }
// The signals that stop elastic with a checkpoint: Ctrl-C, kill, and a closed terminal or ssh
// session (the job runs in a process group of its own, which a hangup would not reach).
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
const char* signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
}

void say(const std::string& line) { std::cerr << "pitrain elastic: " << line << std::endl; }

// The value of `--flag X` or `--flag=X` in args ("" when absent). A flag given twice is refused:
// train takes the last, and elastic must watch the file train writes.
std::string flag_value(const std::vector<std::string>& args, const std::string& flag) {
  std::string value;
  int given = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size())
      value = args[i + 1], ++given;
    else if (args[i].rfind(flag + "=", 0) == 0)
      value = args[i].substr(flag.size() + 1), ++given;
  }
  if (given > 1)
    throw UsageError("elastic: " + flag + " is given " + std::to_string(given) +
                     " times in the train arguments; give it once");
  return value;
}

std::vector<std::string> without_flag(const std::vector<std::string>& args,
                                      const std::string& flag) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag)
      ++i;  // and its value
    else if (args[i].rfind(flag + "=", 0) != 0)
      kept.push_back(args[i]);
  }
  return kept;
}

// A file as it is now: a checkpoint is replaced by a rename, so a new one has another inode.
using FileStamp = std::tuple<dev_t, ino_t, int64_t, int64_t>;  // device, inode, mtime (ns), size
std::optional<FileStamp> stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileStamp{st.st_dev, st.st_ino,
                   int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                   int64_t(st.st_size)};
}

int64_t read_progress(const std::string& path) {
  int64_t step = -1;
  std::ifstream(path) >> step;
  return step;
}

std::string self_path() {
  char buf[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    throw Error("cannot find this program's path (/proc/self/exe) to start it under mpirun");
  return std::string(buf, size_t(n));
}

std::string names(const std::vector<Host>& hosts) {
  std::string s;
  for (const auto& h : hosts) s += (s.empty() ? "" : ", ") + h.name;
  return s.empty() ? "none" : s;
}

int ranks_of(const std::vector<Host>& hosts) {
  int n = 0;
  for (const auto& h : hosts) n += h.slots;
  return n;
}

// The processes that descend from this one (its children, theirs, ...), from /proc.
std::vector<pid_t> descendants() {
  std::multimap<pid_t, pid_t> children;  // parent, child
  if (DIR* proc = opendir("/proc")) {
    while (const dirent* entry = readdir(proc)) {
      const pid_t pid = pid_t(std::atoi(entry->d_name));
      if (pid <= 0) continue;
      std::ifstream file("/proc/" + std::string(entry->d_name) + "/stat");
      const std::string stat((std::istreambuf_iterator<char>(file)),
                             std::istreambuf_iterator<char>());
      // The command's name may hold spaces and parentheses.
      const size_t name_end = stat.rfind(')');
      char state = 0;
      int parent = 0;
      if (name_end != std::string::npos &&
          std::sscanf(stat.c_str() + name_end + 1, " %c %d", &state, &parent) == 2)
        children.emplace(pid_t(parent), pid);
    }
    closedir(proc);
  }
  std::vector<pid_t> found = {getpid()};
  for (size_t i = 0; i < found.size(); ++i)
    for (auto [it, end] = children.equal_range(found[i]); it != end; ++it)
      found.push_back(it->second);
  found.erase(found.begin());
  return found;
}

// Ends every process a launch left and returns once all have exited, so that no rank of one
// launch still writes while the next starts. Open MPI puts each local rank in a process group
// of its own, out of reach of mpirun's group; as the child subreaper (run()), elastic becomes
// the parent of every rank that outlives mpirun, so its descendants are all that is left.
void end_launch() {
  const double start = seconds_now();
  for (bool said = false;; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    const std::vector<pid_t> left = descendants();
    for (pid_t pid : left) kill(pid, SIGKILL);
    pid_t reaped;
    while ((reaped = waitpid(-1, nullptr, WNOHANG)) > 0) continue;
    if (reaped < 0 && errno == ECHILD) return;
    // SIGKILLed, yet not gone: stuck in the kernel.
    if (!said && seconds_now() - start > 10 && !left.empty()) {
      say("waiting for process " + std::to_string(left[0]) +
          " of the last launch to exit (killed; see ps -l " + std::to_string(left[0]) +
          ") before the next launch");
      said = true;
    }
  }
}

// A rank 0 killed while writing a checkpoint leaves FILE.tmp.<pid>.<16 hex> behind
// (temp_path_beside): once every process of the launch has exited, such files on this machine
// are leftovers, and an SD card would collect one at every failed launch. Only names of that
// form go: FILE.tmp.notes is the user's.
void remove_checkpoint_leftovers(const std::string& checkpoint) {
  namespace fs = std::filesystem;
  const fs::path path(checkpoint);
  std::error_code error;
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  for (const auto& entry : fs::directory_iterator(folder, error))
    if (is_temp_name_of(entry.path().filename().string(), checkpoint))
      fs::remove(entry.path(), error);
}

// What one launch came to.
struct Outcome {
  int code = 0;             // mpirun's exit code (128 + signal when it was killed)
  int64_t reached = -1;     // the last step rank 0 reported, -1: none
  double last_step_at = 0;  // when that was seen
  bool stalled = false;     // ended by us: no step for too long
  bool took_back = false;   // stopped by us (with a checkpoint) to take lost hosts back
  int stopped_by = 0;       // the kStopSignals one that the user sent us
};

class Supervisor {
 public:
  explicit Supervisor(const ElasticOptions& o)
      : o_(o),
        hosts_(read_hostfile(o.hostfile)),
        shell_(remote_shell(o.mpirun_args, o.probe_timeout)),
        self_(self_path()) {
    const auto& args = o.train_args;
    if (args.empty() || args[0] != "train")
      throw UsageError(
          "elastic: give the training command after `--`: pitrain elastic --hostfile FILE -- train "
          "ARGS...");
    checkpoint_ = flag_value(args, "--checkpoint");
    if (checkpoint_.empty())
      throw UsageError(
          "elastic: the train arguments need --checkpoint FILE (and --checkpoint-seconds S): "
          "restarts resume from it");
    for (const char* flag : {"--expect-ranks", "--progress-file"})
      if (!flag_value(args, flag).empty())
        throw UsageError(std::string("elastic: leave out ") + flag +
                         ": elastic sets it for each launch");
    const std::string stall = flag_value(args, "--stall-timeout");
    const double stall_timeout = stall.empty() ? 300 : std::atof(stall.c_str());
    // The ranks' own watchdog ends a stalled job first (rank 0 names the ranks that had not
    // arrived within 2 s more); this catches what it cannot see: a stall in MPI's start-up, or
    // mpirun waiting, after the ranks have gone, for a daemon on a host that is gone.
    // --stall-timeout 0 ("never"): never here either.
    deadline_ = stall_timeout > 0 ? stall_timeout + 5 : std::numeric_limits<double>::infinity();
    resume_ = flag_value(args, "--resume");
    // A file at --checkpoint from an earlier run is not this run's until this run replaces it:
    // a restart before then resumes as the first launch did (from --resume, or from scratch).
    if (resume_.empty() || !same_file(resume_, checkpoint_))
      earlier_checkpoint_ = stamp_of(checkpoint_);
    if (o.min_hosts > int(hosts_.size()))
      throw UsageError("elastic: --min-hosts " + std::to_string(o.min_hosts) + " but " +
                       o.hostfile + " lists " + std::to_string(hosts_.size()) + " hosts");
    char dir[] = "/tmp/pitrain-elastic-XXXXXX";
    if (!mkdtemp(dir)) throw Error("cannot make a folder under /tmp for the hostfiles of restarts");
    dir_ = dir;
  }
  ~Supervisor() {
    for (const char* name : {"/hosts", "/progress", "/progress.stop", "/progress.stalled"})
      std::remove((dir_ + name).c_str());
    rmdir(dir_.c_str());
  }

  int run() {
    // Ranks that outlive mpirun become elastic's children (end_launch).
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    for (int sig : kStopSignals) std::signal(sig, on_signal);
    active_ = answering();
    if (int(active_.size()) < o_.min_hosts) return give_up("at the start");
    if (active_.size() < hosts_.size())
      say("starting without " + names(lost()) + " (no answer); taken back when they answer");
    for (int restarts = 0;;) {
      // Ctrl-C while probing.
      const Outcome r = g_signal ? Outcome{0, -1, 0, false, false, g_signal} : launch();
      if (r.stopped_by) {
        const int64_t saved = saved_step();
        say(std::string("stopped by ") + signal_name(r.stopped_by) + "; " +
            (saved < 0 ? resume_hint(saved)
                       : checkpoint_ + " holds step " + std::to_string(saved) +
                             "; continue with the same command plus --resume " + checkpoint_ +
                             " among the train arguments"));
        return 128 + r.stopped_by;
      }
      if (r.code == 0) return 0;  // the training completed
      const int64_t saved = saved_step();
      if (r.took_back) {
        const auto before = active_;
        active_ = answering();
        say("taking back " + names(difference(active_, before)) + " (answers again); " +
            std::to_string(lost_steps(r, saved)) + " steps lost; resuming on " +
            std::to_string(ranks_of(active_)) + " ranks");
      } else if (const int code = after_failure(r, saved, restarts); code >= 0) {
        return code;
      }
      if (saved >= 0) resume_ = checkpoint_;
    }
  }

 private:
  static int64_t lost_steps(const Outcome& r, int64_t saved) {
    return std::max<int64_t>(0, r.reached - std::max<int64_t>(saved, 0));
  }

  // After a launch that failed: the hosts of the next launch, and a line saying why. Returns
  // elastic's exit code when it gives up, else -1.
  int after_failure(const Outcome& r, int64_t saved, int& restarts) {
    failed_at_ = r.reached >= 0 ? r.last_step_at : seconds_now();
    failed_mid_run_ = r.reached >= 0;
    auto missing = missing_hosts();  // of this launch's ranks, so before active_ changes
    // A start-up that failed unnamed blames the hosts on trial (taken back after a hold): a rank
    // that cannot reach the others stalls MPI's own start-up, before any watchdog runs.
    if (missing.empty() && r.reached < 0)
      for (const auto& h : active_)
        if (held_.count(h.name)) missing.push_back(h);
    const auto up = answering();
    const auto gone = difference(active_, up);
    const auto left_out = difference(missing, gone);  // answer, yet their ranks did not arrive
    // A host taken back after its hold whose rank again did not arrive: a retry, not a restart.
    const bool retry = r.reached < 0 && gone.empty() && !left_out.empty() &&
                       std::all_of(left_out.begin(), left_out.end(),
                                   [&](const Host& h) { return held_.count(h.name); });
    for (const auto& h : left_out) hold(h.name);
    active_ = difference(up, left_out);
    if (r.reached < 0 && !r.stalled && gone.empty() && left_out.empty()) {
      say("the job failed before its first step (exit " + std::to_string(r.code) +
          ") with every host answering: " +
          (r.code == 127 ? "install Open MPI (openmpi-bin) or give --mpirun PATH"
                         : "not a lost host; see its message above"));
      return r.code;
    }
    if (int(active_.size()) < o_.min_hosts) return give_up("after the job failed");
    if (!retry && restarts == o_.max_restarts) {
      say("giving up after " + std::to_string(restarts) + " restarts (--max-restarts); " +
          resume_hint(saved));
      return 1;
    }
    restarts += retry ? 0 : 1;
    const std::string what =
        r.stalled ? (r.reached < 0 ? "start-up stalled (no step in " : "stalled (no step for ") +
                        std::to_string(int(deadline_)) + " s)"
                  : "the job failed (exit " + std::to_string(r.code) + ")";
    const std::string leaving =
        left_out.empty() ? ""
                         : "; leaving out " + names(left_out) +
                               " (answers, but its rank did not arrive; asked again in " +
                               std::to_string(int(held_[left_out[0].name].seconds)) + " s)";
    say((retry ? "taking back " + names(left_out) + " failed"
               : "restart " + std::to_string(restarts) + "/" + std::to_string(o_.max_restarts)) +
        ": " + what + "; lost " +
        (gone.empty() ? std::string("no host (all answer)") : names(gone) + " (no answer)") +
        leaving + "; " + std::to_string(lost_steps(r, saved)) + " steps lost (reached " +
        std::to_string(std::max<int64_t>(r.reached, 0)) + ", checkpoint at " +
        std::to_string(std::max<int64_t>(saved, 0)) + "); resuming on " +
        std::to_string(ranks_of(active_)) + " ranks");
    return -1;
  }

  // The hosts of the ranks that rank 0's stall report names (DIR/progress.stalled), placed as
  // mpirun placed this launch's ranks; never rank 0's host, which holds the checkpoint. A report
  // that names rank 0 blames no host: rank 0 was not waiting in MPI, so the others may have
  // waited for it, not it for them.
  std::vector<Host> missing_hosts() const {
    std::ifstream report(dir_ + "/progress.stalled");
    std::vector<int> ranks;
    for (int rank; report >> rank;) ranks.push_back(rank);
    if (ranks.empty() || std::count(ranks.begin(), ranks.end(), 0) > 0) return {};
    const auto placed = rank_hosts(active_, o_.mpirun_args);
    if (placed.empty()) {
      say("the hosts of the ranks that had not arrived are not known with these --mpirun-args "
          "(--map-by node or "
          "slot places ranks as elastic counts): none is left out");
      return {};
    }
    std::vector<Host> missing;
    for (const auto& h : active_)
      for (int rank : ranks)
        if (rank > 0 && rank < int(placed.size()) && placed[size_t(rank)] == h.name &&
            h.name != placed[0]) {
          missing.push_back(h);
          break;
        }
    return missing;
  }

  // Leaves a host whose rank did not arrive out of the launches until its hold ends. The first
  // hold is ten stall deadlines and each next one twice the last, so a host that never takes
  // part costs a stalled start-up ever more rarely; a launch it takes part in ends its holds.
  void hold(const std::string& name) {
    Hold& h = held_[name];
    h.seconds = h.seconds > 0 ? 2 * h.seconds : 10 * deadline_;
    h.until = seconds_now() + h.seconds;
  }
  bool held(const std::string& name) const {
    const auto it = held_.find(name);
    return it != held_.end() && seconds_now() < it->second.until;
  }

  // The step this run's checkpoint holds, -1 when it has written none yet.
  int64_t saved_step() const {
    const auto now = stamp_of(checkpoint_);
    if (!now || now == earlier_checkpoint_) return -1;
    return load_checkpoint(checkpoint_).state.step;
  }

  // The hosts that answer, less those on hold.
  std::vector<Host> answering() {
    const auto answered = probe_hosts(shell_, hosts_, o_.probe_timeout);
    std::vector<Host> up;
    for (size_t i = 0; i < hosts_.size(); ++i)
      if (answered[i] && !held(hosts_[i].name)) up.push_back(hosts_[i]);
    return up;
  }
  std::vector<Host> lost() const { return difference(hosts_, active_); }
  // The hosts left out of this launch that may be taken back: lost, and not on hold.
  std::vector<Host> to_ask() const {
    std::vector<Host> ask;
    for (const auto& h : lost())
      if (!held(h.name)) ask.push_back(h);
    return ask;
  }
  static std::vector<Host> difference(const std::vector<Host>& a, const std::vector<Host>& b) {
    std::vector<Host> d;
    for (const auto& h : a)
      if (std::none_of(b.begin(), b.end(), [&](const Host& x) { return x.name == h.name; }))
        d.push_back(h);
    return d;
  }
  std::string resume_hint(int64_t saved) const {
    return saved < 0 ? "no checkpoint was written yet"
                     : checkpoint_ + " is intact at step " + std::to_string(saved) +
                           "; resume with --resume " + checkpoint_;
  }
  int give_up(const std::string& when) {
    const auto left_out = difference(lost(), to_ask());
    say("only " + std::to_string(active_.size()) + " of " + std::to_string(hosts_.size()) +
        " hosts answer " + when + " (" + names(active_) + "; no answer: " + names(to_ask()) +
        (left_out.empty() ? "" : "; left out, their ranks did not arrive: " + names(left_out)) +
        "), --min-hosts " + std::to_string(o_.min_hosts) + ": giving up; " +
        resume_hint(saved_step()));
    return 1;
  }

  std::vector<std::string> command() const {
    std::vector<std::string> c = {o_.mpirun, "-np", std::to_string(ranks_of(active_)), "--hostfile",
                                  dir_ + "/hosts"};
    c.insert(c.end(), o_.mpirun_args.begin(), o_.mpirun_args.end());
    c.push_back(self_);
    const auto train = without_flag(o_.train_args, "--resume");
    c.insert(c.end(), train.begin(), train.end());
    c.insert(c.end(), {"--expect-ranks", std::to_string(ranks_of(active_)), "--progress-file",
                       dir_ + "/progress"});
    if (!resume_.empty()) c.insert(c.end(), {"--resume", resume_});
    return c;
  }

  // Rank 0 sees the file within a tenth of a second and the ranks stop as on SIGTERM: at an
  // agreed step, with a checkpoint.
  void ask_stop() const { std::ofstream(dir_ + "/progress.stop") << "stop\n"; }

  Outcome launch() {
    write_hostfile(dir_ + "/hosts", active_);
    for (const char* name : {"/progress", "/progress.stop", "/progress.stalled"})
      std::remove((dir_ + name).c_str());
    const pid_t pid = spawn(command(), false);
    Outcome r;
    const double started = seconds_now();
    double last_advance = started, next_probe = started + o_.probe_every, stop_sent = 0;
    bool ranks_started = false;
    std::vector<int> answers(hosts_.size(), 0);  // lost hosts' answers in a row
    for (int status = 0;; std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      const double t = seconds_now();
      // Rank 0's watchdog has started (it makes progress.stalled): a stalled start-up is timed
      // from here, so that the watchdog names the ranks that had not arrived before this ends the
      // job.
      if (!ranks_started && stamp_of(dir_ + "/progress.stalled"))
        ranks_started = true, last_advance = t;
      if (const int64_t step = read_progress(dir_ + "/progress"); step > r.reached) {
        if (r.reached < 0 && failed_at_ > 0)
          say("training again on " + std::to_string(ranks_of(active_)) + " ranks at step " +
              std::to_string(step) + ", " + std::to_string(int(t - failed_at_ + 0.5)) +
              " s after " +
              (failed_mid_run_ ? "the last step before the failure" : "the failed start-up"));
        if (r.reached < 0) {
          failed_at_ = 0;
          // Its ranks arrived: no longer on hold.
          for (const auto& h : active_) held_.erase(h.name);
        }
        r.reached = step, r.last_step_at = last_advance = t;
      }
      if (g_signal && !r.stopped_by) {
        r.stopped_by = g_signal;
        ask_stop();
        stop_sent = t;
      }
      if (!stop_sent && t - last_advance > deadline_) {
        r.stalled = true;
        kill(-pid, SIGTERM);
        stop_sent = t;
      }
      if (stop_sent && t - stop_sent > 30) kill(pid, SIGINT);  // no step ends: mpirun's own stop
      if (stop_sent && t - stop_sent > 60) kill(-pid, SIGKILL);
      if (!stop_sent && r.reached >= 0 && !to_ask().empty() && t >= next_probe) {
        const auto gone = to_ask();
        const auto answered = probe_hosts(shell_, gone, o_.probe_timeout);
        bool back = false;
        for (size_t i = 0; i < gone.size(); ++i) {
          int& n =
              answers[size_t(std::find_if(hosts_.begin(), hosts_.end(),
                                          [&](const Host& h) { return h.name == gone[i].name; }) -
                             hosts_.begin())];
          n = answered[i] ? n + 1 : 0;
          back |= n >= 2;  // twice in a row: not a flapping link
        }
        if (back) {  // stop with a checkpoint at an agreed step: nothing is lost
          r.took_back = true;
          ask_stop();
          stop_sent = t;
        }
        next_probe = seconds_now() + o_.probe_every;
      }
    }
    end_launch();
    remove_checkpoint_leftovers(checkpoint_);
    return r;
  }

  const ElasticOptions& o_;
  std::vector<Host> hosts_, active_;
  std::vector<std::string> shell_;
  // This program, found once: a rebuild during the run leaves "(deleted)" behind.
  const std::string self_;
  std::string checkpoint_, resume_, dir_;
  std::optional<FileStamp> earlier_checkpoint_;  // the --checkpoint file of an earlier run, if any
  struct Hold {
    double until = 0, seconds = 0;  // left out until then; the length of its last hold
  };
  std::map<std::string, Hold> held_;  // hosts whose ranks did not arrive, by name
  double deadline_;
  double failed_at_ = 0;         // when the last failure's last step was seen (0: none pending)
  bool failed_mid_run_ = false;  // the last failure came after a step (else in start-up)
};

}  // namespace

int run_elastic(const ElasticOptions& opts) { return Supervisor(opts).run(); }

}  // namespace pitrain
