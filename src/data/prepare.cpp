#include "pitrain/prepare.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "pitrain/dataset.h"
#include "pitrain/error.h"
#include "pitrain/image_files.h"
#include "pitrain/memory.h"
#include "pitrain/paths.h"
#include "pitrain/rng.h"

namespace pitrain {
namespace {

// Rows of `src` picked by `order`, as a split.
Split gather(const std::vector<uint8_t>& images, const std::vector<int32_t>& labels,
             const std::vector<int64_t>& order, size_t first, size_t last) {
  Split s;
  s.images.resize((last - first) * kImagePixels);
  s.labels.resize(last - first);
  for (size_t i = first; i < last; ++i) {
    std::copy_n(&images[size_t(order[i]) * kImagePixels], kImagePixels,
                &s.images[(i - first) * kImagePixels]);
    s.labels[i - first] = labels[size_t(order[i])];
  }
  return s;
}

std::vector<int64_t> shuffled_order(size_t n, uint64_t key) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  shuffle_with_key(order, key);
  return order;
}

std::string idx_file(const std::string& dir, const std::string& stem) {
  for (const char* ext : {"-ubyte.gz", "-ubyte", ".gz", ""}) {
    std::string p = dir + "/" + stem + ext;
    if (std::ifstream(p)) return p;
  }
  throw Error(dir + ": no " + stem +
              "-ubyte(.gz) file; point --idx at a folder of MNIST-style IDX files");
}

void check_labels(const std::string& file, const std::vector<uint8_t>& labels,
                  const ImageArray& images, size_t classes) {
  if (int64_t(labels.size()) != images.rows)
    throw Error(file + ": " + std::to_string(labels.size()) + " labels for " +
                std::to_string(images.rows) + " images");
  for (auto l : labels)
    if (l >= classes)
      throw Error(file + ": label " + std::to_string(l) + " but only " + std::to_string(classes) +
                  " class names were given; pass --classes with one name per label");
}

}  // namespace

std::vector<std::string> parse_class_list(const std::string& text_or_file) {
  std::ifstream file(text_or_file);
  std::stringstream text;
  if (file)
    text << file.rdbuf();
  else
    text << text_or_file;
  std::vector<std::string> names;
  std::string line, name;
  while (std::getline(text, line)) {
    std::stringstream items(line.substr(0, line.find('#')));  // names split by commas or lines
    while (std::getline(items, name, ',')) {
      name.erase(0, name.find_first_not_of(" \t\r"));
      name.erase(name.find_last_not_of(" \t\r") + 1);
      if (!name.empty()) names.push_back(name);
    }
  }
  if (names.empty())
    throw UsageError("--classes " + text_or_file +
                     ": no class names (give a,b,c or a file with one name a line)");
  if (!file && names.size() == 1)  // most likely a file name with a typo
    throw UsageError("--classes " + text_or_file +
                     ": no such file, and one class name is no list; give a file with one name a "
                     "line, or the names as a,b,c");
  if (const auto problem = class_names_problem(names); !problem.empty())
    throw UsageError("--classes " + text_or_file + ": " + problem);
  return names;
}

std::vector<std::string> npy_class_names(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".npy") names.push_back(it->path().stem().string());
  if (ec) throw Error(dir + ": cannot list the folder (" + ec.message() + "); check --npy");
  std::sort(names.begin(), names.end());
  if (names.size() < 2)
    throw Error(dir + ": " + std::to_string(names.size()) +
                " <class>.npy file(s); a classifier needs at least 2 classes");
  return names;
}

void check_prepare_options(const PrepareOptions& o) {
  if (o.npy_dir.empty() == o.idx_dir.empty())
    throw UsageError("prepare: give exactly one of --npy DIR or --idx DIR");
  if (o.out.empty()) throw UsageError("prepare: --out FILE.h5 is required");
  if (!(o.val_fraction > 0 && o.val_fraction < 1))
    throw UsageError(
        "prepare: --val-fraction must be above 0 and below 1 (train needs a val split), got " +
        std::to_string(o.val_fraction));
  if (o.max_per_class < 0) throw UsageError("prepare: --max-per-class must be 0 (all) or positive");
}

std::vector<ClassCount> prepare_dataset(const PrepareOptions& o) {
  check_prepare_options(o);
  std::vector<std::string> names = o.classes;
  std::vector<std::pair<std::string, std::string>> inputs;  // that --out must not overwrite
  if (!o.classes_file.empty()) inputs.push_back({"--classes", o.classes_file});
  Split train, val;
  std::map<std::string, std::string> provenance{{"seed", std::to_string(o.seed)},
                                                {"created_by", "pitrain prepare"}};
  if (!o.npy_dir.empty()) {
    if (names.empty()) names = npy_class_names(o.npy_dir);
    const size_t first_npy = inputs.size();
    for (const auto& name : names) inputs.push_back({"--npy", o.npy_dir + "/" + name + ".npy"});
    check_output("--out", o.out, inputs);
    std::vector<uint8_t> images;
    std::vector<int32_t> labels;
    for (size_t c = 0; c < names.size(); ++c) {
      const std::string& file = inputs[first_npy + c].second;
      const auto a = read_npy_images(file);
      const int64_t keep = o.max_per_class > 0 ? std::min(o.max_per_class, a.rows) : a.rows;
      // The classes so far, their copy in /train and /val, and this file: all in memory at once.
      check_fits_memory("prepare --npy up to " + file + " (" +
                            std::to_string(labels.size() + size_t(keep)) + " drawings)",
                        3.0 * double(images.size() + size_t(keep) * kImagePixels),
                        "keep fewer with --max-per-class N");
      images.insert(images.end(), a.pixels.begin(), a.pixels.begin() + keep * kImagePixels);
      labels.insert(labels.end(), size_t(keep), int32_t(c));
    }
    const auto order = shuffled_order(labels.size(), rng_key(o.seed, 0x9e3));
    const size_t n_val = size_t(double(labels.size()) * o.val_fraction + 0.5);
    val = gather(images, labels, order, 0, n_val);
    train = gather(images, labels, order, n_val, labels.size());
    provenance["source"] = "Quick, Draw! numpy_bitmap .npy files from " + o.npy_dir +
                           " (Google LLC, CC BY 4.0); " +
                           (o.max_per_class > 0 ? "the first " + std::to_string(o.max_per_class)
                                                : std::string("all")) +
                           " drawings of each class";
    provenance["val_fraction"] = std::to_string(o.val_fraction);
  } else {
    for (auto [stem, split] : {std::pair{"train", &train}, std::pair{"t10k", &val}}) {
      const std::string ifile = idx_file(o.idx_dir, std::string(stem) + "-images-idx3");
      const std::string lfile = idx_file(o.idx_dir, std::string(stem) + "-labels-idx1");
      auto idx_inputs = inputs;
      idx_inputs.insert(idx_inputs.end(), {{"--idx", ifile}, {"--idx", lfile}});
      check_output("--out", o.out, idx_inputs);
      const auto a = read_idx_images(ifile);
      const auto l = read_idx_labels(lfile);
      if (names.empty())
        for (int c = 0; c < 10; ++c) names.push_back(std::to_string(c));
      check_labels(lfile, l, a, names.size());
      const std::vector<int32_t> labels(l.begin(), l.end());
      const auto order = shuffled_order(labels.size(), rng_key(o.seed, stem[1]));
      *split = gather(a.pixels, labels, order, 0, labels.size());
    }
    provenance["source"] = "IDX files from " + o.idx_dir + "; /val is the IDX test set (t10k)";
  }
  if (train.size() == 0)
    throw Error(o.out + ": the train split would be empty; lower --val-fraction or add data");
  if (val.size() == 0)  // train refuses a file without one
    throw Error(o.out + ": the val split would be empty; " +
                (o.npy_dir.empty() ? "the t10k-* IDX files hold no images"
                                   : "raise --val-fraction or add data"));
  write_dataset(o.out, train, val, names, provenance);
  std::vector<ClassCount> counts(names.size());
  for (size_t c = 0; c < names.size(); ++c) counts[c].name = names[c];
  for (auto l : train.labels) counts[size_t(l)].train++;
  for (auto l : val.labels) counts[size_t(l)].val++;
  return counts;
}

}  // namespace pitrain
