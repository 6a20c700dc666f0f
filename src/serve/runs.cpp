// The --log CSV files of `pitrain train` (header line, then one row an epoch) as JSON columns.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "pitrain/serve.h"

namespace pitrain {
namespace {

constexpr size_t kMaxLogBytes = 4 << 20;  // a row an epoch: megabytes are not a log

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, ',');) fields.push_back(field);
  return fields;
}

bool parse_number(const std::string& text, double& value) {
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

// The name /api/runs shows (serve.h, runs_json).
std::string run_name(const std::string& path) {
  const bool relative = !path.empty() && path[0] != '/' && path.find("..") == std::string::npos;
  return relative ? path : path.substr(path.find_last_of('/') + 1);
}

// The file's bytes; on failure `why` says what the file is instead. The file is opened without
// following a link (a link could lead to /dev/zero or another user's file) and without waiting (a
// FIFO would hold the request until a writer came), and read only when it is a regular file, and
// only up to kMaxLogBytes (it may grow while it is read).
std::string read_bounded(const std::string& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = errno == ENOENT  ? "not written yet (no such file)"
          : errno == ELOOP ? "a symbolic link: give --log the file it points to"
                           : "cannot open: " + std::string(std::strerror(errno));
    return {};
  }
  struct stat st = {};
  std::string text;
  if (::fstat(fd, &st) != 0) {
    why = "cannot read: " + std::string(std::strerror(errno));
  } else if (S_ISDIR(st.st_mode)) {
    why = "a folder, not a --log file of pitrain train";
  } else if (!S_ISREG(st.st_mode)) {
    why =
        "not a regular file (a FIFO, device or socket): give --log the CSV file that pitrain train "
        "--log writes";
  } else {
    char buffer[65536];
    ssize_t n = 0;
    while (text.size() <= kMaxLogBytes && (n = ::read(fd, buffer, sizeof buffer)) > 0)
      text.append(buffer, size_t(n));
    if (n < 0) why = "cannot read: " + std::string(std::strerror(errno));
  }
  if (why.empty() && text.size() > kMaxLogBytes)
    why = "over 4 MB: not a --log file of pitrain train";
  ::close(fd);
  return text;
}

nlohmann::json read_log(const std::string& path) {
  nlohmann::json run = {{"name", run_name(path)}};
  std::string why;
  const std::string text = read_bounded(path, why);
  if (!why.empty()) {
    run["error"] = why;
    return run;
  }
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> names = split_commas(line);
  nlohmann::json columns = nlohmann::json::object();
  for (const auto& name : names) columns[name] = nlohmann::json::array();
  // A row counts once it is whole: the run may be writing the last one right now.
  while (std::getline(in, line) && !in.eof()) {
    const std::vector<std::string> fields = split_commas(line);
    std::vector<double> values(fields.size());
    bool whole = fields.size() == names.size();
    for (size_t i = 0; whole && i < fields.size(); ++i) whole = parse_number(fields[i], values[i]);
    if (!whole) continue;
    for (size_t i = 0; i < names.size(); ++i) columns[names[i]].push_back(values[i]);
  }
  if (!columns.contains("val_accuracy") || !columns.contains("seconds")) {
    run["error"] = "no val_accuracy and seconds columns: not a --log file of pitrain train";
    return run;
  }
  // Logs of older versions have no wall_seconds: the epochs' seconds added up, without start-up.
  if (!columns.contains("wall_seconds")) {
    double sum = 0;
    columns["wall_seconds"] = nlohmann::json::array();
    for (const auto& seconds : columns["seconds"])
      columns["wall_seconds"].push_back(sum += seconds.get<double>());
  }
  run["columns"] = columns;
  return run;
}

}  // namespace

nlohmann::json runs_json(const std::vector<std::string>& logs) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& path : logs) runs.push_back(read_log(path));
  return {{"runs", runs}};
}

}  // namespace pitrain
