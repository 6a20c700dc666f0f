// The classes a model sees in one image: what `pitrain predict` prints and `pitrain serve`
// answers, from the same code.
#pragma once
#include <cstdint>
#include <vector>

#include "pitrain/model.h"

namespace pitrain {

struct Guess {
  int label = 0;
  float probability = 0;
};

// Every class's probability for one 28x28 image (uint8, light strokes on black, row-major).
// Not thread-safe: forward uses the model's scratch buffers.
std::vector<float> class_probabilities(Model& model, const uint8_t* pixels);

// The k most probable classes of one 28x28 image (uint8, light strokes on black, row-major),
// best first; fewer when the model has fewer classes. Not thread-safe: forward uses the model's
// scratch buffers.
std::vector<Guess> top_classes(Model& model, const uint8_t* pixels, int k);

}  // namespace pitrain
