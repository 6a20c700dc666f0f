// Errors that reach the user as one line.
#pragma once
#include <stdexcept>
#include <string>

namespace pitrain {

// Something is wrong with a file, the data or the run: the message names the thing and the fix.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A bad flag or flag value. Every rank parses the same command line, so every rank throws it
// together: rank 0 alone prints it and all ranks exit without MPI_Abort.
struct UsageError : Error {
  using Error::Error;
};

// An error that every rank learned of together (see run_together): the lowest failed rank
// carries its message, the others an empty one; all exit without MPI_Abort.
struct JointError : Error {
  using Error::Error;
};

}  // namespace pitrain
