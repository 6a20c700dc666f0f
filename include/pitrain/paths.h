// Output files, checked before any work is done: an output must not be a folder, nor one of the
// run's input files (which writing it would destroy), and its folder must be writable. Written
// beside and then put in place: the old file survives any crash.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pitrain {

// True when both paths name one existing file, also through symbolic or hard links.
bool same_file(const std::string& a, const std::string& b);

// Throws an Error naming `flag` and `path` unless `path` can be written as an output: not a
// folder, none of `inputs` ({flag, path} pairs, for the message), and its folder writable.
// An empty path (the output is not wanted) passes.
void check_output(const std::string& flag, const std::string& path,
                  const std::vector<std::pair<std::string, std::string>>& inputs);

// A name beside `path` that no other writer picks: PATH.tmp.<pid>.<random>. A rank 0 of an earlier
// launch may still be writing the same output; create the file exclusively (O_EXCL, H5F_ACC_EXCL),
// so that a name in use fails instead of being shared.
std::string temp_path_beside(const std::string& path);
// Whether `name` (a file name, no folder) is one temp_path_beside(path) could have made.
bool is_temp_name_of(const std::string& name, const std::string& path);

// Puts the finished `tmp` in place of `path`, durably: tmp's data reach the disk before the
// rename, and the rename before this returns (a Pi loses power: the file is the old or the new
// one, never empty). `durable` false: the rename alone (a file rewritten many times a second,
// which a reader must never see half written, but which may be lost). On failure tmp is removed
// and an Error names `path`.
void replace_durably(const std::string& tmp, const std::string& path, bool durable = true);

// Runs `write` on a new name beside `path` (temp_path_beside; `write` creates the file) and puts
// the finished file in place (replace_durably): a failure (a full disk) leaves a file already at
// `path` as it was and no part of the new one. An Error from `write` is given again with `path`
// for the temporary name and what became of `path`.
void write_beside(const std::string& path, const std::function<void(const std::string&)>& write);

// Writes `data` to a new file of temp_path_beside(path), created exclusively, and puts it in place
// (replace_durably). An Error names `path` and the fix.
void write_file_atomically(const std::string& path, std::string_view data, bool durable = true);

}  // namespace pitrain
