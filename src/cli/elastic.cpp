#include <cmath>
#include <cstring>
#include <sstream>

#include "pitrain/cli.h"
#include "pitrain/elastic.h"
#include "pitrain/text.h"

namespace pitrain::cli {

int elastic(int argc, char** argv) {
  int split = 1;  // the training command follows `--`
  while (split < argc && std::strcmp(argv[split], "--")) ++split;
  for (int i = 1; i < split; ++i)  // else cxxopts would name the first train flag as unknown
    require(std::strcmp(argv[i], "train") != 0,
            "elastic: put `--` before the training command: pitrain elastic --hostfile FILE -- "
            "train ARGS...");
  ElasticOptions o;
  std::string mpirun_args;
  cxxopts::Options options =
      command_options("elastic",
                      "Runs `mpirun ... pitrain train` and, when the job fails, resumes from its "
                      "checkpoint on the hosts\n"
                      "that answer (start it without mpirun, on the hostfile's first host)");
  options.custom_help("--hostfile FILE [OPTION...] -- train ARGS...");
  options.add_options()(
      "hostfile",
      "Open MPI hostfile of all hosts (required); the first runs rank 0 (run elastic there)",
      cxxopts::value(o.hostfile),
      "FILE")("min-hosts", "Give up when fewer hosts answer",
              cxxopts::value(o.min_hosts)->default_value(std::to_string(o.min_hosts)), "N")(
      "max-restarts", "Give up after N restarts after failures",
      cxxopts::value(o.max_restarts)->default_value(std::to_string(o.max_restarts)),
      "N")("probe-timeout", "Seconds a host has to answer through mpirun's remote shell",
           cxxopts::value(o.probe_timeout)->default_value(format_number("%g", o.probe_timeout)),
           "SECONDS")(
      "probe-every",
      "Seconds between asking lost hosts while the job runs; one that answers twice in a row is "
      "taken back (a stop with a checkpoint, then a restart)",
      cxxopts::value(o.probe_every)->default_value(format_number("%g", o.probe_every)), "SECONDS")(
      "mpirun", "The mpirun to run", cxxopts::value(o.mpirun)->default_value(o.mpirun), "PROGRAM")(
      "mpirun-args",
      "Extra mpirun arguments, split at spaces (no quoting: put ssh options in ~/.ssh/config or "
      "OMPI_MCA_plm_rsh_args), e.g. \"--map-by node --bind-to none --mca btl_tcp_if_include "
      "wlan0\"",
      cxxopts::value(mpirun_args), "ARGS");
  cxxopts::ParseResult r;
  if (!parse(options, split, argv, true, r)) return 0;
  require(!o.hostfile.empty(),
          "elastic: --hostfile FILE is required (an Open MPI hostfile of all hosts)");
  require(o.min_hosts >= 1, "--min-hosts must be 1 or more, got " + std::to_string(o.min_hosts));
  require(o.max_restarts >= 0,
          "--max-restarts must be 0 or more, got " + std::to_string(o.max_restarts));
  require(o.probe_timeout > 0 && std::isfinite(o.probe_timeout),
          "--probe-timeout must be a positive number of seconds");
  require(o.probe_every > 0 && std::isfinite(o.probe_every),
          "--probe-every must be a positive number of seconds");
  require(split + 1 < argc,
          "elastic: give the training command after `--`: pitrain elastic --hostfile FILE -- train "
          "ARGS...");
  std::istringstream words(mpirun_args);
  for (std::string w; words >> w;) o.mpirun_args.push_back(w);
  o.train_args.assign(argv + split + 1, argv + argc);
  return run_elastic(o);
}

}  // namespace pitrain::cli
