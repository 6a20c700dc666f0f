// The --log CSV files of `pitrain train` (header line, then one row an epoch) as JSON columns.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pitrain/serve.h"

namespace pitrain {
namespace {

constexpr std::streamoff kMaxLogBytes = 4 << 20;  // a row an epoch: megabytes are not a log

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

nlohmann::json read_log(const std::string& path) {
  nlohmann::json run = {{"name", path.substr(path.find_last_of('/') + 1)}, {"path", path}};
  auto failed = [&](const std::string& why) {
    run["error"] = why;
    return run;
  };
  if (std::filesystem::is_directory(path)) return failed("a folder, not a --log file of pitrain train");
  std::ifstream in(path, std::ios::ate);
  if (!in) return failed("not written yet (no such file)");
  if (in.tellg() > kMaxLogBytes) return failed("over 4 MB: not a --log file of pitrain train");
  in.seekg(0);
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
  if (!columns.contains("val_accuracy") || !columns.contains("seconds"))
    return failed("no val_accuracy and seconds columns: not a --log file of pitrain train");
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
