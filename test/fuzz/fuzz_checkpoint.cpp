// libFuzzer target for the checkpoint loader: the input is written as a file and loaded; it must
// load or throw a pitrain::Error. Seeded with a real checkpoint, so mutations reach the
// validation of model_spec, class names, weight shapes and optimizer state.
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "pitrain/checkpoint.h"
#include "pitrain/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/pitrain-fuzz-" + std::to_string(getpid()) + ".h5";
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    pitrain::load_checkpoint(path);
  } catch (const pitrain::Error&) {
  }
  return 0;
}
