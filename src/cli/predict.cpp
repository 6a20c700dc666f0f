#include <cstdio>

#include "pitrain/checkpoint.h"
#include "pitrain/classify.h"
#include "pitrain/cli.h"
#include "pitrain/error.h"
#include "pitrain/image_input.h"

namespace pitrain::cli {

namespace {

// Top-3 classes of each image or .npy row, printed as they come.
void predict_files(const std::string& model, const std::vector<std::string>& files) {
  Checkpoint ckpt = load_checkpoint(model);
  for (const auto& file : files) {
    const ImageArray images = read_prediction_input(file);
    for (int64_t i = 0; i < images.rows; ++i) {
      std::printf("%s", file.c_str());
      if (images.rows > 1) std::printf("[%lld]", (long long)i);
      for (const Guess& g : top_classes(ckpt.model, &images.pixels[size_t(i) * kImagePixels], 3))
        std::printf("  %s %.3f", ckpt.class_names[size_t(g.label)].c_str(), g.probability);
      std::printf("\n");
    }
  }
}

}  // namespace

int predict(int argc, char** argv, Comm& comm) {
  cxxopts::Options options("predict", "Top-3 classes of 28x28 grayscale PGM/PNG images or .npy rows");
  options.add_options()
    ("model", "Checkpoint from `pitrain train --checkpoint`", cxxopts::value<std::string>())
    ("files", "Images (.pgm, .png) or .npy files", cxxopts::value<std::vector<std::string>>());
  options.parse_positional({"files"});
  options.positional_help("FILE...");
  cxxopts::ParseResult r;
  if (!parse(options, argc, argv, comm, r)) return 0;
  if (!r.count("model") || !r.count("files")) throw UsageError("predict: give --model FILE.h5 and one or more image files");
  run_together(comm, [&] {  // a handful of images: rank 0 is plenty; the others wait to learn how it went
    if (comm.rank() == 0) predict_files(r["model"].as<std::string>(), r["files"].as<std::vector<std::string>>());
  });
  return 0;
}

}  // namespace pitrain::cli
