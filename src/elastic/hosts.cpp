// Hostfiles and the question "which hosts answer?", asked through mpirun's own remote shell.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "pitrain/elastic.h"
#include "pitrain/error.h"

namespace pitrain {

std::vector<Host> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read the hostfile; give an Open MPI hostfile, one `host slots=N` a line");
  std::vector<Host> hosts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string text = line.substr(0, line.find('#'));
    std::istringstream words(text);
    Host h;
    if (!(words >> h.name)) continue;
    h.line = text;
    for (std::string w; words >> w;)
      if (w.rfind("slots=", 0) == 0) {
        char* end = nullptr;
        const long slots = std::strtol(w.c_str() + 6, &end, 10);
        if (*end || slots < 1 || slots > 4096)
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
  for (const auto& h : hosts) out << h.line << "\n";
  if (!out.flush()) throw Error(path + ": cannot write the hostfile of the restart");
}

std::vector<std::string> remote_shell(const std::vector<std::string>& mpirun_args, double timeout_seconds) {
  std::string agent;
  if (const char* env = std::getenv("OMPI_MCA_plm_rsh_agent")) agent = env;
  for (size_t i = 0; i + 2 < mpirun_args.size(); ++i)
    if ((mpirun_args[i] == "--mca" || mpirun_args[i] == "-mca") && mpirun_args[i + 1] == "plm_rsh_agent")
      agent = mpirun_args[i + 2];
  agent = agent.substr(0, agent.find(':'));  // Open MPI takes "ssh : rsh" as alternatives: the first
  std::istringstream words(agent);
  std::vector<std::string> shell;
  for (std::string w; words >> w;) shell.push_back(w);
  if (shell.empty()) shell = {"ssh"};
  if (shell[0] == "ssh" || (shell[0].size() > 4 && shell[0].substr(shell[0].size() - 4) == "/ssh"))
    shell.insert(shell.end(), {"-o", "BatchMode=yes",  // never ask a password
                               "-o", "ConnectTimeout=" + std::to_string(std::max(1, int(timeout_seconds)))});
  return shell;
}

std::vector<bool> probe_hosts(const std::vector<std::string>& shell, const std::vector<Host>& hosts,
                              double timeout_seconds) {
  std::vector<pid_t> pids(hosts.size(), -1);
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::vector<std::string> words = shell;
    words.insert(words.end(), {hosts[i].name, "true"});
    pids[i] = fork();
    if (pids[i] == 0) {
      setpgid(0, 0);  // its own group: a timeout ends the shell and whatever it started
      freopen("/dev/null", "r", stdin);
      freopen("/dev/null", "w", stdout);
      freopen("/dev/null", "w", stderr);
      std::vector<char*> argv;
      for (auto& w : words) argv.push_back(w.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    if (pids[i] > 0) setpgid(pids[i], pids[i]);  // as the child does: whichever runs first
  }
  std::vector<bool> answered(hosts.size(), false);
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
