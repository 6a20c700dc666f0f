#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "pitrain/checkpoint.h"
#include "pitrain/cli.h"
#include "pitrain/dataset.h"
#include "pitrain/error.h"
#include "pitrain/image_input.h"

namespace pitrain::cli {

namespace {

// The top 3 classes and their probabilities, on one line.
void print_top(const std::string& label, const std::vector<float>& p, const std::vector<std::string>& class_names) {
  const int classes = int(p.size()), top = std::min(3, classes);
  std::vector<int> order(static_cast<size_t>(classes));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int a, int b) { return p[a] > p[b]; });
  std::printf("%s", label.c_str());
  for (int k = 0; k < top; ++k)
    std::printf("  %s %.3f", class_names[size_t(order[size_t(k)])].c_str(), p[size_t(order[size_t(k)])]);
  std::printf("\n");
}

// {"file": ..., "row": i, "class": the most probable, "probabilities": {class: p, ...}} in
// class order; each float printed so that it reads back exactly.
void print_json(const std::string& file, int64_t row, const std::vector<float>& p,
                const std::vector<std::string>& class_names) {
  nlohmann::ordered_json probabilities = nlohmann::ordered_json::object();
  for (size_t c = 0; c < p.size(); ++c) probabilities[class_names[c]] = double(p[c]);
  const size_t best = size_t(std::max_element(p.begin(), p.end()) - p.begin());
  const nlohmann::ordered_json line = {
      {"file", file}, {"row", row}, {"class", class_names[best]}, {"probabilities", probabilities}};
  std::printf("%s\n", line.dump().c_str());
}

// The class probabilities of each image or .npy row, printed as they come.
void predict_files(const std::string& model, const std::vector<std::string>& files, bool json) {
  Checkpoint ckpt = load_checkpoint(model);
  const int classes = ckpt.model.classes();
  for (const auto& file : files) {
    const ImageArray images = read_prediction_input(file);
    const Split split{images.pixels, std::vector<int32_t>(size_t(images.rows), 0)};
    BatchLoader loader(split, 1);
    loader.reset_in_order();
    for (int64_t i = 0; loader.has_next(); ++i) {
      const float* logits = ckpt.model.forward(loader.next().x, 1, Context{});
      std::vector<float> p(logits, logits + classes);
      softmax_rows(p.data(), 1, classes);
      if (json)
        print_json(file, i, p, ckpt.class_names);
      else
        print_top(images.rows > 1 ? file + "[" + std::to_string(i) + "]" : file, p, ckpt.class_names);
    }
  }
}

}  // namespace

int predict(int argc, char** argv, Comm& comm) {
  cxxopts::Options options("predict", "Top-3 classes (--json: every class probability) of 28x28 grayscale PGM/PNG images or .npy rows");
  options.add_options()
    ("model", "Checkpoint from `pitrain train --checkpoint`", cxxopts::value<std::string>())
    ("files", "Images (.pgm, .png) or .npy files", cxxopts::value<std::vector<std::string>>())
    ("json", "One JSON line an image with every class's probability at full precision");
  options.parse_positional({"files"});
  options.positional_help("FILE...");
  cxxopts::ParseResult r;
  if (!parse(options, argc, argv, comm, r)) return 0;
  if (!r.count("model") || !r.count("files")) throw UsageError("predict: give --model FILE.h5 and one or more image files");
  run_together(comm, [&] {  // a handful of images: rank 0 is plenty; the others wait to learn how it went
    if (comm.rank() == 0) predict_files(r["model"].as<std::string>(), r["files"].as<std::vector<std::string>>(), r.count("json") > 0);
  });
  return 0;
}

}  // namespace pitrain::cli
