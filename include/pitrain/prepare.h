// `pitrain prepare`: image files in, one shuffled and split dataset file out.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pitrain {

// What prepare --npy holds of the drawings by default: larger inputs go through bucket files.
constexpr int64_t kDefaultPrepareMemory = int64_t(256) << 20;

struct PrepareOptions {
  std::string npy_dir;  // Quick Draw numpy_bitmap files, <class>.npy
  std::string idx_dir;  // or MNIST-style IDX files (train-* and t10k-*)
  // npy: which files, in label order (none: every <class>.npy, sorted); idx: the label names.
  std::vector<std::string> classes;
  // The file the class names came from, if any: out must not overwrite it.
  std::string classes_file;
  int64_t max_per_class = 0;  // npy: keep the first N drawings of each class (0 = all)
  uint64_t seed = 0;
  double val_fraction = 0.1;  // npy only: IDX keeps its own test set as /val
  int64_t memory =
      kDefaultPrepareMemory;  // npy: bytes of drawings held at once (bucket files past it)
  std::string out;
};

struct ClassCount {
  std::string name;
  int64_t train = 0, val = 0;
};

// UsageError unless the options make sense together (no file is read): run it on every rank.
void check_prepare_options(const PrepareOptions& opts);

// Writes opts.out and returns the per-class counts, in label order.
std::vector<ClassCount> prepare_dataset(const PrepareOptions& opts);

// Class names from "a,b,c" or from a file with one name per line (# starts a comment); at least
// two, each once.
std::vector<std::string> parse_class_list(const std::string& text_or_file);

// The class names of every <class>.npy in `dir`, sorted (Keras' image_dataset_from_directory).
std::vector<std::string> npy_class_names(const std::string& dir);

}  // namespace pitrain
