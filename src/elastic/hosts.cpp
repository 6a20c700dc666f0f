// Hostfiles and the question "which hosts answer?", asked through mpirun's own remote shell.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "pitrain/elastic.h"
#include "pitrain/error.h"

namespace pitrain {

// Open MPI's hostfile syntax: `host [slots=N] [more options]`, spaces allowed around `=`, and
// count= and cpu= mean slots=. A host without slots counts as one rank (Open MPI would give it
// its cores; the Pi recipe is one rank a Pi, with threads for the cores): the hostfiles of the
// launches say slots=N, so mpirun places the ranks as counted here.
std::vector<Host> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read the hostfile; give an Open MPI hostfile, one `host slots=N` a line");
  std::vector<Host> hosts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string text = std::regex_replace(line.substr(0, line.find('#')), std::regex(R"(\s*=\s*)"), "=");
    std::istringstream words(text);
    Host h;
    if (!(words >> h.name)) continue;
    for (std::string w; words >> w;) {
      const std::string key = w.substr(0, w.find('='));
      if (key != "slots" && key != "count" && key != "cpu") {
        h.options += " " + w;
        continue;
      }
      char* end = nullptr;
      const long slots = std::strtol(w.c_str() + key.size() + 1, &end, 10);
      if (w.size() == key.size() || *end || slots < 1 || slots > 4096)
        throw Error(path + ":" + std::to_string(number) + ": '" + w + "' is not slots=N with N from 1 to 4096");
      h.slots = int(slots);
    }
    hosts.push_back(h);
  }
  if (hosts.empty()) throw Error(path + ": no hosts in the hostfile; list one `host slots=N` a line");
  return hosts;
}

void write_hostfile(const std::string& path, const std::vector<Host>& hosts) {
  std::ofstream out(path);
  for (const auto& h : hosts) out << h.name << " slots=" << h.slots << h.options << "\n";
  if (!out.flush()) throw Error(path + ": cannot write the hostfile of the restart");
}

pid_t spawn(const std::vector<std::string>& command, bool quiet) {
  const pid_t pid = fork();
  if (pid < 0) throw Error("cannot start " + command[0] + " (fork failed)");
  if (pid == 0) {
    setpgid(0, 0);  // its own group: Ctrl-C reaches elastic alone, which ends the group and all it started
    freopen("/dev/null", "r", stdin);
    if (quiet) {
      freopen("/dev/null", "w", stdout);
      freopen("/dev/null", "w", stderr);
    }
    std::vector<char*> argv;
    for (const auto& w : command) argv.push_back(const_cast<char*>(w.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    if (!quiet) std::fprintf(stderr, "pitrain elastic: error: cannot run %s (%s)\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);  // as the child does: whichever runs first
  return pid;
}

namespace {

// The value mpirun would take for MCA parameter `name`: `--mca name X` in its arguments, else
// OMPI_MCA_name.
std::string mca_value(const std::vector<std::string>& mpirun_args, const std::string& name) {
  std::string value;
  if (const char* env = std::getenv(("OMPI_MCA_" + name).c_str())) value = env;
  for (size_t i = 0; i + 2 < mpirun_args.size(); ++i)
    if ((mpirun_args[i] == "--mca" || mpirun_args[i] == "-mca") && mpirun_args[i + 1] == name) value = mpirun_args[i + 2];
  return value;
}

// This machine: mpirun starts ranks here without its remote shell, so no probe is needed (and
// a Pi or laptop need not run an ssh server to itself).
bool is_this_host(const std::string& name) {
  char here[256] = {};
  gethostname(here, sizeof here - 1);
  const std::string host = here, short_host = host.substr(0, host.find('.'));
  return name == "localhost" || name.rfind("127.", 0) == 0 || name == "::1" || name == host || name == short_host;
}

}  // namespace

std::vector<std::string> remote_shell(const std::vector<std::string>& mpirun_args, double timeout_seconds) {
  std::string agent = mca_value(mpirun_args, "plm_rsh_agent");
  agent = agent.substr(0, agent.find(':'));  // Open MPI takes "ssh : rsh" as alternatives: the first
  std::istringstream words(agent + " " + mca_value(mpirun_args, "plm_rsh_args"));
  std::vector<std::string> shell;
  for (std::string w; words >> w;) shell.push_back(w);
  if (shell.empty() || shell[0][0] == '-') shell.insert(shell.begin(), "ssh");
  if (shell[0] == "ssh" || (shell[0].size() > 4 && shell[0].substr(shell[0].size() - 4) == "/ssh"))
    shell.insert(shell.end(), {"-o", "BatchMode=yes",  // never ask a password
                               "-o", "ConnectTimeout=" + std::to_string(std::max(1, int(timeout_seconds)))});
  return shell;
}

std::vector<bool> probe_hosts(const std::vector<std::string>& shell, const std::vector<Host>& hosts,
                              double timeout_seconds) {
  std::vector<bool> answered(hosts.size(), false);
  std::vector<pid_t> pids(hosts.size(), -1);
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (is_this_host(hosts[i].name)) {
      answered[i] = true;
      continue;
    }
    std::vector<std::string> words = shell;
    words.insert(words.end(), {hosts[i].name, "true"});
    pids[i] = spawn(words, true);  // a timeout ends the shell and whatever it started
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  size_t running = size_t(std::count_if(pids.begin(), pids.end(), [](pid_t p) { return p > 0; }));
  while (running > 0 && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < hosts.size(); ++i) {
      int status = 0;
      if (pids[i] > 0 && waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        answered[i] = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        pids[i] = -1, --running;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (pid_t pid : pids)
    if (pid > 0) {  // no answer in time
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  return answered;
}

}  // namespace pitrain
