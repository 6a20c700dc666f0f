#include "pitrain/image_input.h"

#include <png.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>

#include "pitrain/error.h"

namespace pitrain {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Checked from the header, before any pixel is allocated: a header may declare any size.
void check_image_size(const std::string& path, int64_t w, int64_t h) {
  if (w != kImageSide || h != kImageSide)
    throw Error(path + ": image is " + std::to_string(w) + "x" + std::to_string(h) +
                ", expected " + image_size_text() + "; scale it first (README: \"Predict on your own drawing\")");
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
    throw Error(path + ": not an 8-bit grayscale PGM (P2 or P5)");
  check_image_size(path, w, h);
  std::vector<uint8_t> px(size_t(w) * h);
  if (magic == "P5") {
    f.get();  // the single whitespace after maxval
    f.read(reinterpret_cast<char*>(px.data()), std::streamsize(px.size()));
  } else {
    for (auto& p : px) p = uint8_t(next_int());
  }
  if (!f) throw Error(path + ": truncated PGM");
  for (auto& p : px) p = uint8_t(int(p) * 255 / maxval);
  return px;
}

std::vector<uint8_t> read_png(const std::string& path, int& w, int& h) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path.c_str()))
    throw Error(path + ": not a readable PNG (" + img.message + ")");
  img.format = PNG_FORMAT_GRAY;  // libpng converts colour and alpha to 8-bit gray
  const uint32_t iw = img.width, ih = img.height;
  if (iw != kImageSide || ih != kImageSide) png_image_free(&img);
  check_image_size(path, iw, ih);  // before libpng inflates anything
  w = int(img.width), h = int(img.height);
  std::vector<uint8_t> px(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, px.data(), 0, nullptr))
    throw Error(path + ": cannot decode PNG (" + img.message + ")");
  return px;
}

}  // namespace

ImageArray read_prediction_input(const std::string& path) {
  if (ends_with(path, ".npy")) return read_npy_images(path);
  int w = 0, h = 0;
  std::vector<uint8_t> px = ends_with(path, ".png") ? read_png(path, w, h) : read_pgm(path, w, h);
  const double mean = std::accumulate(px.begin(), px.end(), 0.0) / double(px.size());
  if (mean > 127)
    for (auto& p : px) p = uint8_t(255 - p);
  return {std::move(px), 1};
}

}  // namespace pitrain
