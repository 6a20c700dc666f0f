#include <cstdio>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "pitrain/checkpoint.h"
#include "pitrain/classify.h"
#include "pitrain/cli.h"
#include "pitrain/error.h"
#include "pitrain/image_input.h"
#include "pitrain/text.h"

namespace pitrain::cli {

namespace {

// {"file": ..., "row": i, "class": the most probable, "probabilities": {class: p, ...}} in
// class order; each float printed so that it reads back exactly.
void print_json(const std::string& file, int64_t row, const std::vector<float>& p,
                const std::vector<std::string>& class_names) {
  nlohmann::ordered_json probabilities = nlohmann::ordered_json::object();
  for (size_t c = 0; c < p.size(); ++c) probabilities[class_names[c]] = double(p[c]);
  const size_t best = size_t(std::max_element(p.begin(), p.end()) - p.begin());
  const nlohmann::ordered_json line = {
      {"file", file}, {"row", row}, {"class", class_names[best]}, {"probabilities", probabilities}};
  std::printf("%s\n", json_text(line).c_str());
}

// The top 3 classes (or with json every class's probability) of each image or .npy row.
void predict_files(const std::string& model, const std::vector<std::string>& files, bool json) {
  Checkpoint ckpt = load_checkpoint(model);
  for (const auto& file : files) {
    const ImageArray images = read_prediction_input(file);
    for (int64_t i = 0; i < images.rows; ++i) {
      const uint8_t* pixels = &images.pixels[size_t(i) * kImagePixels];
      if (json) {
        print_json(file, i, class_probabilities(ckpt.model, pixels), ckpt.class_names);
        continue;
      }
      std::printf("%s", file.c_str());
      if (images.rows > 1) std::printf("[%lld]", (long long)i);
      for (const Guess& g : top_classes(ckpt.model, pixels, 3))
        std::printf("  %s %.3f", ckpt.class_names[size_t(g.label)].c_str(), g.probability);
      std::printf("\n");
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
