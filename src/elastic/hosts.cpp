// Hostfiles and the question "which hosts answer?", asked through mpirun's own remote shell.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string_view>
#include <thread>

#include "pitrain/elastic.h"
#include "pitrain/error.h"

namespace pitrain {

bool is_host_name(const std::string& name) {
  if (name.empty() || name[0] == '-') return false;
  for (const char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("._:[]%@-").find(c) == std::string_view::npos)
      return false;
  return true;
}

// Open MPI's hostfile syntax: `host [slots=N] [more options]`, spaces allowed around `=`, and
// count= and cpu= mean slots=. A host without slots counts as one rank (Open MPI would give it
// its cores; the Pi recipe is one rank a Pi, with threads for the cores): the hostfiles of the
// launches say slots=N, so mpirun places the ranks as counted here.
std::vector<Host> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error(path +
                ": cannot read the hostfile; give an Open MPI hostfile, one `host slots=N` a line");
  std::vector<Host> hosts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string text =
        std::regex_replace(line.substr(0, line.find('#')), std::regex(R"(\s*=\s*)"), "=");
    std::istringstream words(text);
    Host h;
    if (!(words >> h.name)) continue;
    if (!is_host_name(h.name))
      throw Error(path + ":" + std::to_string(number) + ": '" + h.name +
                  "' is not a host name or address (letters, digits, . - _ : [ ] % @; not starting "
                  "with -)");
    for (std::string w; words >> w;) {
      const std::string key = w.substr(0, w.find('='));
      if (key != "slots" && key != "count" && key != "cpu") {
        h.options += " " + w;
        continue;
      }
      char* end = nullptr;
      const long slots = std::strtol(w.c_str() + key.size() + 1, &end, 10);
      if (w.size() == key.size() || *end || slots < 1 || slots > 4096)
        throw Error(path + ":" + std::to_string(number) + ": '" + w +
                    "' is not slots=N with N from 1 to 4096");
      h.slots = int(slots);
    }
    hosts.push_back(h);
  }
  if (hosts.empty())
    throw Error(path + ": no hosts in the hostfile; list one `host slots=N` a line");
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
    // Its own group: Ctrl-C reaches elastic alone, which ends the group and all it started.
    setpgid(0, 0);
    freopen("/dev/null", "r", stdin);
    if (quiet) {
      freopen("/dev/null", "w", stdout);
      freopen("/dev/null", "w", stderr);
    }
    std::vector<char*> argv;
    for (const auto& w : command) argv.push_back(const_cast<char*>(w.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    if (!quiet)
      std::fprintf(stderr, "pitrain elastic: error: cannot run %s (%s)\n", argv[0],
                   std::strerror(errno));
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
    if ((mpirun_args[i] == "--mca" || mpirun_args[i] == "-mca") && mpirun_args[i + 1] == name)
      value = mpirun_args[i + 2];
  return value;
}

// This machine: mpirun starts ranks here without its remote shell, so no probe is needed (and
// a Pi or laptop need not run an ssh server to itself).
bool is_this_host(const std::string& name) {
  char here[256] = {};
  gethostname(here, sizeof here - 1);
  const std::string host = here, short_host = host.substr(0, host.find('.'));
  return name == "localhost" || name.rfind("127.", 0) == 0 || name == "::1" || name == host ||
         name == short_host;
}

}  // namespace

std::vector<std::string> remote_shell(const std::vector<std::string>& mpirun_args,
                                      double timeout_seconds) {
  std::string agent = mca_value(mpirun_args, "plm_rsh_agent");
  // Open MPI takes "ssh : rsh" as alternatives: the first.
  agent = agent.substr(0, agent.find(':'));
  std::istringstream words(agent + " " + mca_value(mpirun_args, "plm_rsh_args"));
  std::vector<std::string> shell;
  for (std::string w; words >> w;) shell.push_back(w);
  if (shell.empty() || shell[0][0] == '-') shell.insert(shell.begin(), "ssh");
  if (shell[0] == "ssh" || (shell[0].size() > 4 && shell[0].substr(shell[0].size() - 4) == "/ssh"))
    shell.insert(shell.end(),
                 {"-o", "BatchMode=yes",  // never ask a password
                  "-o", "ConnectTimeout=" + std::to_string(std::max(1, int(timeout_seconds)))});
  return shell;
}

std::vector<std::string> rank_hosts(const std::vector<Host>& hosts,
                                    const std::vector<std::string>& mpirun_args) {
  std::string policy = mca_value(mpirun_args, "rmaps_base_mapping_policy");
  if (!mca_value(mpirun_args, "rmaps_base_ranking_policy").empty()) return {};
  for (size_t i = 0; i < mpirun_args.size(); ++i) {
    const std::string& a = mpirun_args[i];
    if ((a == "--map-by" || a == "-map-by") && i + 1 < mpirun_args.size())
      policy = mpirun_args[i + 1];
    if (a == "--bynode" || a == "-bynode") policy = "node";
    for (const char* other :
         {"--rank-by", "-rank-by", "--rankfile", "-rf", "--npernode", "-npernode", "--npersocket",
          "-npersocket", "--ppr", "-ppr", "--host", "-host", "-H"})
      if (a == other) return {};
  }
  policy = policy.substr(0, policy.find(':'));
  std::transform(policy.begin(), policy.end(), policy.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  const bool by_node = policy == "node";
  const std::vector<std::string> filling = {"",        "slot",    "hwthread", "core", "l1cache",
                                            "l2cache", "l3cache", "socket",   "numa", "board"};
  if (!by_node && std::find(filling.begin(), filling.end(), policy) == filling.end()) return {};
  std::vector<int> left;
  for (const auto& h : hosts) left.push_back(h.slots);
  std::vector<std::string> ranks;
  // Rounds over the hosts: by node one rank a host, else all its slots.
  for (bool placed = true; placed;) {
    placed = false;
    for (size_t i = 0; i < hosts.size(); ++i) {
      const int take = by_node ? std::min(left[i], 1) : left[i];
      ranks.insert(ranks.end(), size_t(take), hosts[i].name);
      left[i] -= take, placed |= take > 0;
    }
  }
  return ranks;
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
    // `--`: the host is never one of the shell's options.
    words.insert(words.end(), {"--", hosts[i].name, "true"});
    pids[i] = spawn(words, true);  // a timeout ends the shell and whatever it started
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
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
