#include "pitrain/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "pitrain/error.h"

namespace pitrain {

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void check_output(const std::string& flag, const std::string& path,
                  const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (path.empty()) return;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(flag + " " + path + ": is a folder; give a file name in it (e.g. " + path + "/out.h5)");
  for (const auto& [input_flag, input] : inputs)
    if (path == input || same_file(path, input))
      throw Error(flag + " " + path + ": is the same file as " + input_flag + " " + input +
                  ", which writing it would destroy; write to another file");
  const std::string probe = path + ".tmp";  // where checkpoints are written before the rename
  const bool existed = ::access(probe.c_str(), F_OK) == 0;  // then it is kept, whoever wrote it
  if (!std::ofstream(probe, std::ios::app))
    throw Error(flag + " " + path + ": cannot write there; check that the folder exists and is writable");
  if (!existed) std::remove(probe.c_str());
}

}  // namespace pitrain
