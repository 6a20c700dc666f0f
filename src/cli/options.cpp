#include <algorithm>
#include <iostream>

#include "pitrain/cli.h"
#include "pitrain/error.h"

namespace pitrain::cli {

bool parse(cxxopts::Options& options, int argc, char** argv, const Comm& comm, cxxopts::ParseResult& result) {
  return parse(options, argc, argv, comm.rank() == 0, result);
}

bool parse(cxxopts::Options& options, int argc, char** argv, bool speaks, cxxopts::ParseResult& result) {
  options.add_options()("h,help", "Show this help");
  try {
    result = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(options.program() + ": " + e.what() + "; see `pitrain " + options.program() + " --help`");
  }
  if (result.count("help")) {
    if (speaks) std::cout << options.help() << std::flush;
    return false;
  }
  if (!result.unmatched().empty())
    throw UsageError(options.program() + ": unexpected argument '" + result.unmatched()[0] + "'; see `pitrain " +
                     options.program() + " --help`");
  return true;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

void require_choice(const std::string& flag, const std::string& value, const std::vector<std::string>& choices) {
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i)
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  require(std::find(choices.begin(), choices.end(), value) != choices.end(), flag + " " + value + ": use " + list);
}

}  // namespace pitrain::cli
