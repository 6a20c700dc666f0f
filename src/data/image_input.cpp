#include "pitrain/image_input.h"

#include <png.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>

#include "pitrain/error.h"

namespace pitrain {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lowercase(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Checked from the header, before any pixel is allocated: a header may declare any size.
void check_image_size(const std::string& path, int64_t w, int64_t h) {
  if (w != kImageSide || h != kImageSide)
    throw Error(path + ": image is " + std::to_string(w) + "x" + std::to_string(h) + ", expected " +
                image_size_text() + "; scale it first (docs/data.md: \"Your own drawing\")");
}

// PGM: "P5" (binary) or "P2" (text), width, height, maxval, then the pixels; # comments allowed.
std::vector<uint8_t> read_pgm(const std::string& path, int& w, int& h) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open; check the path");
  std::string magic;
  f >> magic;
  auto next_int = [&]() {
    f >> std::ws;
    while (f.peek() == '#') f.ignore(1 << 20, '\n') >> std::ws;
    int v = -1;
    f >> v;
    return v;
  };
  w = next_int(), h = next_int();
  const int maxval = next_int();
  if ((magic != "P5" && magic != "P2") || w <= 0 || h <= 0 || maxval <= 0 || maxval > 255)
    throw Error(path +
                ": not an 8-bit grayscale PGM (P2 or P5); predict reads .png, .pgm, .npy and IDX "
                "(*-ubyte) files");
  check_image_size(path, w, h);
  std::vector<int> values(size_t(w) * h);
  if (magic == "P5") {
    f.get();  // the single whitespace after maxval
    std::vector<uint8_t> bytes(values.size());
    f.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
    std::copy(bytes.begin(), bytes.end(), values.begin());
  } else {
    for (auto& v : values) v = next_int();
  }
  if (!f) throw Error(path + ": truncated PGM");
  std::vector<uint8_t> px(values.size());
  for (size_t i = 0; i < px.size(); ++i) {
    if (values[i] < 0 || values[i] > maxval)
      throw Error(path + ": pixel " + std::to_string(i) + " is " + std::to_string(values[i]) +
                  ", outside the PGM's 0-" + std::to_string(maxval) + " (a damaged file?)");
    px[i] = uint8_t(values[i] * 255 / maxval);
  }
  return px;
}

std::vector<uint8_t> read_png(const std::string& path, int& w, int& h) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path.c_str()))
    throw Error(path + ": not a readable PNG (" + img.message + ")");
  img.format = PNG_FORMAT_GA;  // libpng converts colour to 8-bit gray, and keeps the alpha
  const uint32_t iw = img.width, ih = img.height;
  if (iw != kImageSide || ih != kImageSide) png_image_free(&img);
  check_image_size(path, iw, ih);  // before libpng inflates anything
  w = int(img.width), h = int(img.height);
  std::vector<uint8_t> ga(PNG_IMAGE_SIZE(img));  // (H, W, 2): gray, alpha
  if (!png_image_finish_read(&img, nullptr, ga.data(), 0, nullptr))
    throw Error(path + ": cannot decode PNG (" + img.message + ")");
  // A drawing app's export has strokes on a transparent background: the background becomes
  // the colour that contrasts with the strokes (their mean, weighted by alpha), so that black
  // strokes on nothing stay a drawing (and are inverted below like dark on white).
  double ink = 0, weight = 0;
  for (size_t i = 0; i < ga.size(); i += 2) ink += double(ga[i]) * ga[i + 1], weight += ga[i + 1];
  const int background = weight > 0 && ink / weight < 128 ? 255 : 0;
  std::vector<uint8_t> px(ga.size() / 2);
  for (size_t i = 0; i < px.size(); ++i) {
    const int gray = ga[2 * i], alpha = ga[2 * i + 1];
    px[i] = uint8_t((gray * alpha + background * (255 - alpha) + 127) / 255);
  }
  return px;
}

}  // namespace

void read_prediction_input(const std::string& path, const PredictionBatch& use) {
  const std::string name = lowercase(path);
  const bool npy = ends_with(name, ".npy"),
             idx = ends_with(name, "-ubyte") || ends_with(name, "-ubyte.gz");
  if (npy || idx) {
    ArrayRows rows(path, npy ? npy_image_layout : idx_image_layout);
    if (rows.rows() == 0) throw Error(path + ": holds no images (0 rows)");
    ImageArray batch;
    batch.shape = rows.image_shape();
    for (int64_t first = 0; first < rows.rows(); first += batch.rows) {
      batch.pixels.clear();
      batch.rows = rows.read(kPredictionRows, batch.pixels);
      use(batch, first, rows.rows());
    }
    return;
  }
  int w = 0, h = 0;
  ImageArray image{ends_with(name, ".png") ? read_png(path, w, h) : read_pgm(path, w, h), 1};
  const double mean =
      std::accumulate(image.pixels.begin(), image.pixels.end(), 0.0) / double(image.pixels.size());
  if (mean > 127)
    for (auto& p : image.pixels) p = uint8_t(255 - p);
  use(image, 0, 1);
}

}  // namespace pitrain
