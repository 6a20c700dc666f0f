// pitrain: data-parallel training of small conv nets under mpirun (SPMD).
#include <mpi.h>

#include <cstring>
#include <iostream>
#include <map>

#include "pitrain/cli.h"
#include "pitrain/error.h"
#include "pitrain/run_control.h"
#include "pitrain/matrix.h"
#include "pitrain_revision.h"
#include "pitrain_version.h"

namespace {

const char* kUsage =
    "usage: pitrain <command> [OPTION...]   (start it with mpirun for more than one rank)\n"
    "commands:\n"
    "  prepare   Quick Draw .npy or MNIST-style IDX files -> one shuffled, split HDF5 dataset\n"
    "  summary   print a model's layers, output shapes and parameter counts\n"
    "  train     train on a dataset, each rank on its slice; gradients averaged every step, or "
    "local SGD\n"
    "  evaluate  loss, accuracy, per-class accuracy and confusion matrix of a checkpoint\n"
    "  predict   top-3 classes of 28x28 PNG/PGM images or .npy rows (--json: every class)\n"
    "  export    a checkpoint's model as a TensorFlow.js Layers model\n"
    "  serve     play in the browser (draw, the model guesses) and plot --log files (not under "
    "mpirun)\n"
    "  elastic   run `mpirun ... train` and resume on the hosts that answer when it fails (not "
    "under mpirun)\n"
    "`pitrain <command> --help` lists each command's options; `pitrain --version` prints the "
    "version.\n";

// "pitrain 0.1.0 (rev 1a2b3c4d, release, -Dblas=openblas -Dnative=false -Dfuzz=false; GEMM on
// this CPU: eigen-avx2)": the source revision at build time (src/cli/revision.sh), the build type
// and options, and the kernels this CPU runs. bench/cluster.sh compares the part before ';'
// across the hosts.
int version() {
  std::cout << "pitrain " << PITRAIN_VERSION << " (rev " << PITRAIN_REVISION << ", "
            << PITRAIN_BUILD_OPTIONS << "; GEMM on this CPU: " << pitrain::gemm_backend() << ")\n";
  return 0;
}

int dispatch(int argc, char** argv, pitrain::Comm& comm) {
  using Command = int (*)(int, char**, pitrain::Comm&);
  const std::map<std::string, Command> commands = {
      {"prepare", pitrain::cli::prepare}, {"summary", pitrain::cli::summary},
      {"train", pitrain::cli::train},     {"evaluate", pitrain::cli::evaluate},
      {"predict", pitrain::cli::predict}, {"export", pitrain::cli::export_model},
      {"serve", pitrain::cli::serve}};

  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    if (comm.rank() == 0) std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  auto it = commands.find(argv[1]);
  if (it == commands.end())
    throw pitrain::UsageError(std::string("unknown command '") + argv[1] +
                              "'; run `pitrain --help` for the list");
  return it->second(argc - 1, argv + 1, comm);
}

// `pitrain elastic` starts mpirun itself: it must not be an MPI process (no MPI_Init).
int elastic_main(int argc, char** argv) {
  try {
    return pitrain::cli::elastic(argc, argv);
  } catch (const pitrain::UsageError& e) {
    std::cerr << "pitrain: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "pitrain: error: " << pitrain::failure_text(e) << std::endl;
    return 1;
  }
}

}  // namespace

// Every rank can fail alone: an error that only this rank saw ends the whole job (MPI_Abort)
// with its message, instead of leaving the other ranks waiting in a collective.
int main(int argc, char** argv) {
  if (argc > 1 && !std::strcmp(argv[1], "elastic")) return elastic_main(argc - 1, argv + 1);
  if (argc == 2 && (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version")))
    return version();
  pitrain::prefer_rabenseifner_allreduce();
  // Before MPI_Init: a singleton's MPI_Init forks (its orted), OpenBLAS stops its threads at a
  // fork, and a later call to set their number would start them again, to spin 0.1 s on a core
  // that a pool thread of ours needs.
  pitrain::set_gemm_threads(1);
  int threads = 0;  // MULTIPLE lets the stall watchdog's thread report to rank 0
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &threads);
  pitrain::Comm comm;
  const std::string who = comm.size() > 1 ? " (rank " + std::to_string(comm.rank()) + ")" : "";
  int code = 0;
  try {
    code = dispatch(argc, argv, comm);
  } catch (const pitrain::Stopped& stopped) {
    code = stopped.code;  // a signal: the checkpoint is written, and rank 0 said so
  } catch (const pitrain::UsageError& e) {  // every rank has it: rank 0 speaks for all
    if (comm.rank() == 0) std::cerr << "pitrain: error: " << e.what() << "\n";
    code = 2;
  } catch (const pitrain::JointError& e) {  // every rank knows; only those that failed speak
    if (*e.what()) std::cerr << "pitrain: error" << who << ": " << e.what() << "\n";
    code = e.code;
  } catch (const std::exception& e) {
    std::cerr << "pitrain: error" << who << ": " << pitrain::failure_text(e) << std::endl;
    if (comm.size() > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    code = 1;
  }
  MPI_Finalize();
  return code;
}
