// Errors that reach the user as one line.
#pragma once
#include <new>
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
// carries its message, the others an empty one; all exit without MPI_Abort, with `code`
// (2 when it was a UsageError, as for a bad flag seen by every rank).
struct JointError : Error {
  explicit JointError(const std::string& message, int code = 1) : Error(message), code(code) {}
  int code;
};

// The one line for an exception that is not ours (the standard library's, HDF5's C++ runtime,
// ...): ours already name the thing and the fix; for the others, say what it means.
inline std::string failure_text(const std::exception& e) {
  if (dynamic_cast<const Error*>(&e)) return e.what();
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return "out of memory (" + std::string(e.what()) +
           "); use a smaller model or --batch-size, fewer ranks a node, or check the input files' "
           "sizes";
  return "unexpected failure (" + std::string(e.what()) +
         "); this is a pitrain bug, please report it with the command line";
}

}  // namespace pitrain
