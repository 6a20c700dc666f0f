#include <algorithm>
#include <iostream>
#include <typeinfo>

#include "pitrain/cli.h"
#include "pitrain/error.h"

namespace pitrain::cli {
namespace {

const std::string kProgram = "pitrain ";
// The options that name a file or folder, in any command.
const char* const kPathFlags[] = {"data",    "checkpoint", "resume",       "model",
                                  "log",     "out",        "npy",          "idx",
                                  "classes", "hostfile",   "progress-file"};

// Whether `flag` holds one string, not a list (serve's --log, given once a file): cxxopts tells
// the value's type only by refusing to read it as another.
bool takes_one_value(const cxxopts::ParseResult& result, const char* flag) {
  try {
    result[flag].as<std::string>();
    return true;
  } catch (const std::bad_cast&) {
    return false;
  }
}

}  // namespace

cxxopts::Options command_options(const std::string& command, const std::string& description) {
  return cxxopts::Options(kProgram + command, description);
}

bool parse(cxxopts::Options& options, int argc, char** argv, const Comm& comm,
           cxxopts::ParseResult& result, const HelpLayout& layout) {
  return parse(options, argc, argv, comm.rank() == 0, result, layout);
}

bool parse(cxxopts::Options& options, int argc, char** argv, bool speaks,
           cxxopts::ParseResult& result, const HelpLayout& layout) {
  options.add_options()("h,help", "Show this help");
  const std::string command = options.program().substr(kProgram.size());
  const std::string see = "; see `" + options.program() + " --help`";
  try {
    result = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(command + ": " + e.what() + see);
  }
  if (result.count("help")) {
    std::vector<std::string> groups = layout.groups;
    groups.push_back("");  // --help's own, last
    if (speaks)
      std::cout << options.help(groups)
                << (layout.examples.empty() ? "" : "\nExamples:\n" + layout.examples) << std::flush;
    return false;
  }
  if (!result.unmatched().empty())
    throw UsageError(command + ": unexpected argument '" + result.unmatched()[0] + "'" + see);
  // The parser keeps the last of a repeated option that takes one file; the user meant one of
  // them, and a wrapper (elastic) may read another: refuse. One that takes a list may repeat.
  for (const char* flag : kPathFlags)
    if (result.count(flag) > 1 && takes_one_value(result, flag))
      throw UsageError(command + ": --" + flag + " is given " + std::to_string(result.count(flag)) +
                       " times; give it once");
  return true;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

void require_choice(const std::string& flag, const std::string& value,
                    const std::vector<std::string>& choices) {
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i)
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  require(std::find(choices.begin(), choices.end(), value) != choices.end(),
          flag + " " + value + ": use " + list);
}

}  // namespace pitrain::cli
