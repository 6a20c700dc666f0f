// Inputs for `pitrain predict`: a 28x28 grayscale PGM (P2 or P5) or PNG, or every row of an
// .npy. Drawings on a light background (dark strokes on white paper) are inverted to Quick
// Draw's light-strokes-on-black, decided by the mean pixel.
#pragma once
#include <string>

#include "pitrain/image_files.h"

namespace pitrain {

ImageArray read_prediction_input(const std::string& path);

}  // namespace pitrain
