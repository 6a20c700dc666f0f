#include <cstdio>
#include <filesystem>
#include <iostream>

#include "pitrain/cli.h"
#include "pitrain/prepare.h"

namespace pitrain::cli {

int prepare(int argc, char** argv, Comm& comm) {
  cxxopts::Options options = command_options(
      "prepare", "Image files -> one shuffled HDF5 dataset (/train, /val, class_names)");
  options.add_options()(
      "npy",
      "Folder of Quick Draw numpy_bitmap files, one <class>.npy a class (give --npy or --idx)",
      cxxopts::value<std::string>(), "DIR")(
      "idx", "Folder of MNIST-style IDX files (train-* become /train, t10k-* /val; .gz or plain)",
      cxxopts::value<std::string>(), "DIR")(
      "classes",
      "Class names in label order: a,b,c or a file with one a line (default, or all: with --npy "
      "every <class>.npy, sorted; with --idx 0 to 9)",
      cxxopts::value<std::string>(),
      "LIST")("max-per-class", "With --npy: keep the first N drawings of each class (0: all)",
              cxxopts::value<int64_t>()->default_value("0"), "N")(
      "val-fraction",
      "With --npy: the share held out as /val, above 0 and below 1 (--idx keeps the IDX test set)",
      cxxopts::value<double>()->default_value("0.1"),
      "SHARE")("seed", "Shuffle seed", cxxopts::value<uint64_t>()->default_value("0"), "N")(
      "memory",
      "With --npy: the most MB of drawings held at once; more are shuffled through bucket files "
      "beside --out",
      cxxopts::value<int64_t>()->default_value(std::to_string(kDefaultPrepareMemory >> 20)),
      "MB")("o,out", "Output HDF5 file (required)", cxxopts::value<std::string>(), "FILE");
  cxxopts::ParseResult r;
  if (!parse(options, argc, argv, comm, r)) return 0;
  PrepareOptions o;
  if (r.count("npy")) o.npy_dir = r["npy"].as<std::string>();
  if (r.count("idx")) o.idx_dir = r["idx"].as<std::string>();
  if (r.count("out")) o.out = r["out"].as<std::string>();
  o.max_per_class = r["max-per-class"].as<int64_t>();
  o.val_fraction = r["val-fraction"].as<double>();
  o.seed = r["seed"].as<uint64_t>();
  require(r["memory"].as<int64_t>() >= 1 && r["memory"].as<int64_t>() <= (int64_t(1) << 30),
          "prepare: --memory must be 1 to 1073741824 MB");
  o.memory = r["memory"].as<int64_t>() << 20;
  std::vector<ClassCount> counts;
  run_together(comm, [&] {  // rank 0 is the one writer; a --classes file may be on its disk alone
    if (comm.rank() != 0) return;
    if (r.count("classes") && r["classes"].as<std::string>() != "all") {
      const std::string classes = r["classes"].as<std::string>();
      o.classes = parse_class_list(classes);
      std::error_code not_a_file;  // a list of names may be too long to be a file name
      if (std::filesystem::is_regular_file(classes, not_a_file)) o.classes_file = classes;
    }
    check_prepare_options(o);
    counts = prepare_dataset(o);
  });
  if (comm.rank() != 0) return 0;
  if (!o.npy_dir.empty() && o.classes.empty())  // no --classes, or all
    std::printf(
        "classes: every <class>.npy in %s, in sorted order (label 0 first); --classes chooses "
        "others\n",
        o.npy_dir.c_str());
  int64_t train = 0, val = 0;
  std::printf("%-20s %8s %8s\n", "class", "train", "val");
  for (auto& c : counts) {
    std::printf("%-20s %8lld %8lld\n", c.name.c_str(), (long long)c.train, (long long)c.val);
    train += c.train, val += c.val;
  }
  std::printf("%-20s %8lld %8lld\nwrote %s: %lld images in %zu classes\n", "total",
              (long long)train, (long long)val, o.out.c_str(), (long long)(train + val),
              counts.size());
  return 0;
}

}  // namespace pitrain::cli
