#include "pitrain/prepare.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <sstream>
#include <utility>

#include "pitrain/dataset.h"
#include "pitrain/error.h"
#include "pitrain/h5.h"
#include "pitrain/image_files.h"
#include "pitrain/paths.h"
#include "pitrain/rng.h"
#include "pitrain/text.h"

namespace pitrain {
namespace {

// Rows of `src` picked by `order`, as a split.
Split gather(const ImageArray& images, const std::vector<int32_t>& labels,
             const std::vector<int64_t>& order, size_t first, size_t last) {
  const size_t pixels = size_t(images.shape.size());
  Split s;
  s.shape = images.shape;
  s.images.resize((last - first) * pixels);
  s.labels.resize(last - first);
  for (size_t i = first; i < last; ++i) {
    std::copy_n(&images.pixels[size_t(order[i]) * pixels], pixels, &s.images[(i - first) * pixels]);
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

constexpr int64_t kReadRows = 4096;  // rows read from an input at once

struct NpyInput {
  std::string file;
  int64_t keep;  // its first rows that the dataset takes
  Shape image;   // its images'
};

// Each input's kept rows, in label order, kReadRows at a time: row(image, label, index), index
// counting from 0 over all inputs.
void for_each_npy_row(const std::vector<NpyInput>& inputs,
                      const std::function<void(const uint8_t*, int32_t, int64_t)>& row) {
  int64_t index = 0;
  std::vector<uint8_t> images;
  for (size_t c = 0; c < inputs.size(); ++c) {
    ArrayRows rows(inputs[c].file, npy_image_layout);
    const size_t pixels = size_t(rows.image_shape().size());
    for (int64_t left = inputs[c].keep; left > 0;) {
      images.clear();
      const int64_t n = rows.read(std::min(left, kReadRows), images);
      if (n == 0) throw Error(inputs[c].file + ": ended before the rows its header declares");
      for (int64_t i = 0; i < n; ++i) row(&images[size_t(i) * pixels], int32_t(c), index++);
      left -= n;
    }
  }
}

// Rows spilled to files beside the output, unlinked at once (nothing is left behind, whatever
// ends the process), each row to a bucket drawn from the seed and its index: the buckets in
// order, each shuffled, are a seeded shuffle of every row that never holds more than a bucket.
class Buckets {
 public:
  Buckets(const std::string& beside, int64_t count, const Shape& image)
      : pixels_(size_t(image.size())), image_(image) {
    for (int64_t b = 0; b < count; ++b) {
      const std::string path = temp_path_beside(beside);
      FILE* f = std::fopen(path.c_str(), "w+bx");
      if (!f)
        throw Error(path + ": cannot make bucket file " + std::to_string(b + 1) + " of " +
                    std::to_string(count) + " beside --out (" + std::strerror(errno) +
                    "); check that the folder is writable, or give a larger --memory (fewer "
                    "buckets)");
      std::remove(path.c_str());
      files_.emplace_back(f, &std::fclose);
    }
  }
  int64_t count() const { return int64_t(files_.size()); }
  void add(int64_t b, const uint8_t* image, int32_t label) {
    FILE* f = files_[size_t(b)].get();
    if (std::fwrite(image, 1, pixels_, f) != pixels_ ||
        std::fwrite(&label, sizeof label, 1, f) != 1)
      throw Error("prepare: cannot write a bucket file beside --out (disk full?)");
  }
  Split take(int64_t b) {  // bucket b's rows, in the order written
    FILE* f = files_[size_t(b)].get();
    if (std::fflush(f) != 0 || std::ferror(f))
      throw Error("prepare: cannot write a bucket file beside --out (disk full?)");
    const long bytes = std::ftell(f);
    const size_t rows = size_t(bytes) / (pixels_ + sizeof(int32_t));
    std::rewind(f);
    Split s;
    s.shape = image_;
    s.images.resize(rows * pixels_);
    s.labels.resize(rows);
    for (size_t i = 0; i < rows; ++i)
      if (std::fread(&s.images[i * pixels_], 1, pixels_, f) != pixels_ ||
          std::fread(&s.labels[i], sizeof(int32_t), 1, f) != 1)
        throw Error("prepare: cannot read back a bucket file");
    files_[size_t(b)].reset();
    return s;
  }

 private:
  size_t pixels_;  // a row's
  Shape image_;
  std::vector<std::unique_ptr<FILE, int (*)(FILE*)>> files_;
};

// The dataset file written a chunk at a time: rows at positions [0, n_val) of the shuffled order
// go to /val, the rest to /train.
class DatasetWriter {
 public:
  DatasetWriter(const std::string& path, int64_t n_val, int64_t n_train, const Shape& image)
      : file_(h5::File::create(path)), n_val_(n_val), pixels_(image.size()) {
    for (auto [split, n] : {std::pair{"/val", n_val}, std::pair{"/train", n_train}}) {
      file_.create_rows<uint8_t>(std::string(split) + "/images", image_dims(n, image),
                                 kDatasetChunkRows);
      file_.create_rows<int32_t>(std::string(split) + "/labels", {hsize_t(n)}, kDatasetChunkRows);
    }
  }
  void add(const uint8_t* image, int32_t label) {
    Part& part = at_ < n_val_ ? val_ : train_;
    part.images.insert(part.images.end(), image, image + pixels_);
    part.labels.push_back(label);
    ++at_;
    if (int64_t(part.labels.size()) == kDatasetChunkRows) flush(part);
  }
  h5::File& finish() {
    flush(val_), flush(train_);
    return file_;
  }

 private:
  struct Part {
    explicit Part(std::string n) : name(std::move(n)) {}
    std::string name;
    int64_t written = 0;
    std::vector<uint8_t> images;
    std::vector<int32_t> labels;
  };
  void flush(Part& part) {
    const hsize_t n = hsize_t(part.labels.size());
    if (n == 0) return;
    file_.write_rows<uint8_t>(part.name + "/images", hsize_t(part.written), n, part.images.data());
    file_.write_rows<int32_t>(part.name + "/labels", hsize_t(part.written), n, part.labels.data());
    part.written += int64_t(n), part.images.clear(), part.labels.clear();
  }
  h5::File file_;
  int64_t n_val_, pixels_, at_ = 0;
  Part val_{"/val"}, train_{"/train"};
};

// Drawings of each class in each split of the written file, a chunk of labels at a time.
std::vector<ClassCount> class_counts(const std::string& path,
                                     const std::vector<std::string>& names) {
  const auto f = h5::File::open_read(path);
  std::vector<ClassCount> counts(names.size());
  for (size_t c = 0; c < names.size(); ++c) counts[c].name = names[c];
  for (auto [split, count] : {std::pair{"/train/labels", &ClassCount::train},
                              std::pair{"/val/labels", &ClassCount::val}}) {
    const hsize_t n = f.shape(split)[0];
    for (hsize_t at = 0; at < n; at += hsize_t(kReadRows) * 256)
      for (int32_t l : f.read_rows<int32_t>(split, at, std::min(hsize_t(kReadRows) * 256, n - at)))
        ++(counts[size_t(l)].*count);
  }
  return counts;
}

// --npy: the classes' kept rows shuffled, the first val_fraction of them to /val. Held in
// memory where they fit o.memory, else spilled to buckets of a quarter of it first, each read back
// and shuffled alone.
void write_npy_dataset(const PrepareOptions& o, const std::string& path,
                       const std::vector<NpyInput>& inputs, const std::vector<std::string>& names,
                       const std::map<std::string, std::string>& provenance) {
  int64_t total = 0;
  for (const auto& in : inputs) total += in.keep;
  const int64_t n_val = int64_t(double(total) * o.val_fraction + 0.5);
  if (n_val == 0)
    throw Error(o.out + ": the val split would be empty; raise --val-fraction or add data");
  if (n_val == total)
    throw Error(o.out + ": the train split would be empty; lower --val-fraction or add data");
  const uint64_t key = rng_key(o.seed, 0x9e3);
  std::unique_ptr<DatasetWriter> out;
  const Shape image = inputs.front().image;
  const int64_t pixels = image.size();
  const int64_t bytes = total * int64_t(pixels + int64_t(sizeof(int32_t)));
  if (bytes <= o.memory) {
    Split all;
    all.images.reserve(size_t(total * pixels)), all.labels.reserve(size_t(total));
    for_each_npy_row(inputs, [&](const uint8_t* row, int32_t label, int64_t) {
      all.images.insert(all.images.end(), row, row + pixels);
      all.labels.push_back(label);
    });
    out = std::make_unique<DatasetWriter>(path, n_val, total - n_val, image);
    for (int64_t row : shuffled_order(size_t(total), key))
      out->add(&all.images[size_t(row * pixels)], all.labels[size_t(row)]);
  } else {
    const int64_t bucket_bytes = std::max<int64_t>(1, o.memory / 4);
    Buckets buckets(path, (bytes + bucket_bytes - 1) / bucket_bytes, image);
    for_each_npy_row(inputs, [&](const uint8_t* row, int32_t label, int64_t index) {
      buckets.add(int64_t(rng_key(key, uint64_t(index)) % uint64_t(buckets.count())), row, label);
    });
    out = std::make_unique<DatasetWriter>(path, n_val, total - n_val, image);
    for (int64_t b = 0; b < buckets.count(); ++b) {
      const Split bucket = buckets.take(b);
      for (int64_t row : shuffled_order(size_t(bucket.size()), rng_key(key, uint64_t(b), 1)))
        out->add(&bucket.images[size_t(row * pixels)], bucket.labels[size_t(row)]);
    }
  }
  write_attributes(out->finish(), names, provenance);
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

// What a Quick Draw class name (and so a <class>.npy file's name) is made of.
constexpr const char* kNpyClassNameChars =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-";

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
  std::map<std::string, std::string> provenance{{"seed", std::to_string(o.seed)},
                                                {"created_by", "pitrain prepare"}};
  if (!o.npy_dir.empty()) {
    if (names.empty() || names == std::vector<std::string>{"all"})
      names = npy_class_names(o.npy_dir);
    std::vector<NpyInput> npy;
    for (const auto& name : names) {
      // The name becomes a file name: nothing that leaves --npy or that a class has not.
      if (name.find_first_not_of(kNpyClassNameChars) != std::string::npos)
        throw UsageError(
            "--classes: class name '" + escaped(name) +
            "' cannot name a .npy file in --npy; use letters, digits, spaces, _ and -");
      const std::string file = o.npy_dir + "/" + name + ".npy";
      inputs.push_back({"--npy", file});
      const ArrayRows header(file, npy_image_layout);  // the header alone
      const int64_t rows = header.rows();
      npy.push_back({file, o.max_per_class > 0 ? std::min(o.max_per_class, rows) : rows,
                     header.image_shape()});
      if (npy.back().image != npy.front().image)
        throw Error(file + ": images of " + shape_text(npy.back().image) + ", but " +
                    npy.front().file + "'s are " + shape_text(npy.front().image) +
                    "; every class file of a dataset needs images of one shape");
    }
    check_output("--out", o.out, inputs);
    provenance["source"] = "Quick, Draw! numpy_bitmap .npy files from " + o.npy_dir +
                           " (Google LLC, CC BY 4.0); " +
                           (o.max_per_class > 0 ? "the first " + std::to_string(o.max_per_class)
                                                : std::string("all")) +
                           " drawings of each class";
    provenance["val_fraction"] = std::to_string(o.val_fraction);
    write_beside(o.out, [&](const std::string& path) {
      write_npy_dataset(o, path, npy, names, provenance);
    });
  } else {
    Split train, val;
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
      *split = gather(a, labels, order, 0, labels.size());
    }
    if (train.shape != val.shape)
      throw Error(o.idx_dir + ": the train-* images are " + shape_text(train.shape) +
                  ", the t10k-* images " + shape_text(val.shape) + "; a dataset needs one shape");
    // train refuses a file without either split
    for (auto [split, stem] : {std::pair{&train, "train"}, std::pair{&val, "t10k"}})
      if (split->size() == 0)
        throw Error(o.out + ": the " + (split == &train ? "train" : "val") +
                    " split would be empty; the " + stem + "-* IDX files hold no images");
    provenance["source"] = "IDX files from " + o.idx_dir + "; /val is the IDX test set (t10k)";
    write_beside(o.out, [&](const std::string& path) {
      write_dataset(path, train, val, names, provenance);
    });
  }
  return class_counts(o.out, names);
}

}  // namespace pitrain
