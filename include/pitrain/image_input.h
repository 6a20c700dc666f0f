// Inputs for `pitrain predict`: a 28x28 grayscale PGM (P2 or P5) or PNG, or the rows of a .npy
// or IDX image file (gzip or plain). Drawings on a light background (dark strokes on white paper)
// are inverted to Quick Draw's light-strokes-on-black, decided by the mean pixel.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "pitrain/image_files.h"

namespace pitrain {

// Rows a .npy or IDX input is read at a time: memory does not grow with the file's rows.
constexpr int64_t kPredictionRows = 1024;

// Gets each batch of an input's images in order: the batch, the row of its first image in the
// file, and the file's rows.
using PredictionBatch = std::function<void(const ImageArray& batch, int64_t first, int64_t rows)>;

// A PNG or PGM is one batch of one image; a .npy (rows of 28x28 uint8) or an IDX image file
// (named as MNIST's: *-ubyte or *-ubyte.gz) is read kPredictionRows rows at a time.
void read_prediction_input(const std::string& path, const PredictionBatch& use);

}  // namespace pitrain
