// Subcommands of the pitrain binary. Each takes its own arguments (argv[0] is the subcommand)
// and returns the process exit code.
#pragma once
#include <cxxopts.hpp>
#include <string>
#include <vector>

#include "pitrain/comm.h"

namespace pitrain::cli {

int prepare(int argc, char** argv, Comm& comm);
int summary(int argc, char** argv, Comm& comm);
int train(int argc, char** argv, Comm& comm);
int evaluate(int argc, char** argv, Comm& comm);
int predict(int argc, char** argv, Comm& comm);
int serve(int argc, char** argv, Comm& comm);
// Not under MPI: main runs it before MPI_Init (it starts mpirun itself).
int elastic(int argc, char** argv);
int export_model(int argc, char** argv, Comm& comm);  // `pitrain export`

// The options of `pitrain <command>`: --help's usage line reads "pitrain <command> [OPTION...]".
cxxopts::Options command_options(const std::string& command, const std::string& description);

// How --help lists a command's options: its groups in this order (cxxopts would sort them by
// name; none: the one unnamed group), then the examples, if any.
struct HelpLayout {
  std::vector<std::string> groups;
  std::string examples;
};

// Parses, turning cxxopts' exceptions into UsageError. Returns false after printing --help
// (rank 0, or where `speaks`), in which case the subcommand returns 0.
bool parse(cxxopts::Options& options, int argc, char** argv, const Comm& comm,
           cxxopts::ParseResult& result, const HelpLayout& layout = {});
bool parse(cxxopts::Options& options, int argc, char** argv, bool speaks,
           cxxopts::ParseResult& result, const HelpLayout& layout = {});

// UsageError(message) unless ok.
void require(bool ok, const std::string& message);
// UsageError "--flag value: use a, b or c" unless value is one of choices.
void require_choice(const std::string& flag, const std::string& value,
                    const std::vector<std::string>& choices);

}  // namespace pitrain::cli
