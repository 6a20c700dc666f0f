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

// The top 3 classes (or with json every class's probability) of each image or .npy or IDX row.
void predict_files(const std::string& model, const std::vector<std::string>& files, bool json) {
  Checkpoint ckpt = load_checkpoint(model);  // one image at a time
  for (const auto& file : files)
    read_prediction_input(file, [&](const ImageArray& batch, int64_t first, int64_t rows) {
      if (batch.shape != ckpt.model.input_shape())
        throw Error(file + ": images of " + shape_text(batch.shape) + ", but " + model + " takes " +
                    shape_text(ckpt.model.input_shape()) +
                    "; give images of the shape it was trained on");
      for (int64_t j = 0; j < batch.rows; ++j) {
        const uint8_t* pixels = &batch.pixels[size_t(j * batch.shape.size())];
        const int64_t i = first + j;
        if (json) {
          print_json(file, i, class_probabilities(ckpt.model, pixels), ckpt.class_names);
          continue;
        }
        std::printf("%s", file.c_str());
        if (rows > 1) std::printf("[%lld]", (long long)i);
        for (const Guess& g : top_classes(ckpt.model, pixels, 3))
          std::printf("  %s %.3f", ckpt.class_names[size_t(g.label)].c_str(), g.probability);
        std::printf("\n");
      }
    });
}

}  // namespace

int predict(int argc, char** argv, Comm& comm) {
  cxxopts::Options options = command_options(
      "predict",
      "Top-3 classes (--json: every class's probability) of each FILE:\n"
      "  .png or .pgm: a 28x28 image (PNG: grayscale or colour, strokes on transparency too; PGM: "
      "P2\n"
      "    or P5), light on dark or dark on light (a mostly light image is inverted)\n"
      "  .npy: rows of uint8 images, (N, 784) as Quick Draw's files, (N, H, W) or (N, H, W, C)\n"
      "  *-ubyte or *-ubyte.gz: an IDX image file, as MNIST's (t10k-images-idx3-ubyte.gz)\n"
      "  .npy and IDX files are read a batch of rows at a time, gzip or plain");
  options.add_options()("model", "Checkpoint from `pitrain train --checkpoint` (required)",
                        cxxopts::value<std::string>(),
                        "FILE")("files", "Images (.png, .pgm), .npy or IDX files",
                                cxxopts::value<std::vector<std::string>>())(
      "json", "One JSON line an image with every class's probability at full precision");
  options.parse_positional({"files"});
  options.positional_help("FILE...");
  cxxopts::ParseResult r;
  if (!parse(options, argc, argv, comm, r)) return 0;
  if (!r.count("model") || !r.count("files"))
    throw UsageError("predict: give --model FILE.h5 and one or more image files");
  // A handful of images: rank 0 is plenty; the others wait to learn how it went.
  run_together(comm, [&] {
    if (comm.rank() == 0)
      predict_files(r["model"].as<std::string>(), r["files"].as<std::vector<std::string>>(),
                    r.count("json") > 0);
  });
  return 0;
}

}  // namespace pitrain::cli
