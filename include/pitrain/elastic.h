// `pitrain elastic`: a plain process (no MPI) that runs `mpirun ... pitrain train` and, when the
// job fails (a host lost its link, rebooted, lost power), asks every host whether it answers,
// and resumes from the last checkpoint on those that do. See README "A run that survives
// losing a Pi".
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace pitrain {

// One line of an Open MPI hostfile: the host, its slots, and the rest of the line.
struct Host {
  std::string name;
  int slots = 1;
  // " max_slots=4 ...": the line's other options, kept for the launches' hostfiles.
  std::string options;
};

// A host name or address, optionally user@: letters, digits and . - _ : [ ] % @, not starting
// with `-` (which ssh would read as one of its options). mpi_hostfiles/setup_hosts.sh checks
// the same.
bool is_host_name(const std::string& name);

// The hosts of an Open MPI hostfile (comments and blank lines skipped); an Error naming the
// file and line when one does not parse or names no host.
std::vector<Host> read_hostfile(const std::string& path);
// `host slots=N options` a line.
void write_hostfile(const std::string& path, const std::vector<Host>& hosts);

// Starts `command` in a process group of its own (ended whole with kill(-pid, ...)), stdin from
// /dev/null; `quiet`: stdout and stderr too, else a command that cannot run says so on stderr
// and exits 127.
pid_t spawn(const std::vector<std::string>& command, bool quiet);

// The remote shell mpirun starts its daemons with: `--mca plm_rsh_agent X` in the mpirun
// arguments, else OMPI_MCA_plm_rsh_agent, else ssh (in batch mode, with a connect timeout of
// `timeout_seconds`), followed by plm_rsh_args (`-p 2222`), from the same places. Split into words.
std::vector<std::string> remote_shell(const std::vector<std::string>& mpirun_args,
                                      double timeout_seconds);

// The host of each rank as mpirun places as many ranks as `hosts` have slots: in hostfile order,
// each host's slots filled before the next (Open MPI's default, and --map-by slot, core,
// socket, ...), or with --map-by node one rank a host in turn. Empty when mpirun_args place or
// number the ranks another way (--map-by ppr, seq or dist, --rank-by, a rankfile, --npernode).
std::vector<std::string> rank_hosts(const std::vector<Host>& hosts,
                                    const std::vector<std::string>& mpirun_args);

// Runs `SHELL -- HOST true` for every host at once; answered[i]: host i's command succeeded within
// timeout_seconds. This machine (localhost, 127.*, its own name) answers without a probe.
std::vector<bool> probe_hosts(const std::vector<std::string>& shell, const std::vector<Host>& hosts,
                              double timeout_seconds);

struct ElasticOptions {
  std::string hostfile;
  int min_hosts = 1;
  int max_restarts = 3;
  double probe_timeout = 3;  // seconds a host has to answer
  double probe_every = 5;    // seconds between probes of lost hosts while the job runs
  std::string mpirun = "mpirun";
  std::vector<std::string> mpirun_args;  // extra arguments, before the program
  std::vector<std::string> train_args;   // "train" and its arguments
};

// Supervises the job until it completes (returns its exit code, 0), gives up (a message, 1),
// or is stopped by SIGINT/SIGTERM (a checkpoint, 130/143).
int run_elastic(const ElasticOptions& opts);

}  // namespace pitrain
