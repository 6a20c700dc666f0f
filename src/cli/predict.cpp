#include <algorithm>
#include <cstdio>
#include <numeric>

#include "pitrain/checkpoint.h"
#include "pitrain/cli.h"
#include "pitrain/dataset.h"
#include "pitrain/error.h"
#include "pitrain/image_input.h"

namespace pitrain::cli {

namespace {

// Top-3 classes of each image or .npy row, printed as they come.
void predict_files(const std::string& model, const std::vector<std::string>& files) {
  Checkpoint ckpt = load_checkpoint(model);
  const int classes = ckpt.model.classes(), top = std::min(3, classes);
  for (const auto& file : files) {
    const ImageArray images = read_prediction_input(file);
    const Split split{images.pixels, std::vector<int32_t>(size_t(images.rows), 0)};
    BatchLoader loader(split, 1);
    loader.reset_in_order();
    for (int64_t i = 0; loader.has_next(); ++i) {
      const float* logits = ckpt.model.forward(loader.next().x, 1, Context{});
      std::vector<float> p(logits, logits + classes);
      softmax_rows(p.data(), 1, classes);
      std::vector<int> order(static_cast<size_t>(classes));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int a, int b) { return p[a] > p[b]; });
      std::printf("%s", file.c_str());
      if (images.rows > 1) std::printf("[%lld]", (long long)i);
      for (int k = 0; k < top; ++k)
        std::printf("  %s %.3f", ckpt.class_names[size_t(order[size_t(k)])].c_str(), p[size_t(order[size_t(k)])]);
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
