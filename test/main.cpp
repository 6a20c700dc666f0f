// Catch2 main for every test program: MPI is initialised around the session (as pitrain's own
// main does it), and a failure on any rank fails the program (the exit code is the maximum over
// ranks).
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>

#include "pitrain/comm.h"

int main(int argc, char** argv) {
  pitrain::prefer_rabenseifner_allreduce();  // as pitrain itself
  MPI_Init(&argc, &argv);
  int failed = Catch::Session().run(argc, argv) != 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}
