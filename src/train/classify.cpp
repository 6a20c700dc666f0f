#include "pitrain/classify.h"

#include <algorithm>
#include <numeric>

#include "pitrain/dataset.h"

namespace pitrain {

std::vector<float> class_probabilities(Model& model, const uint8_t* pixels) {
  // Through BatchLoader: the same scaling to [0, 1] as training and evaluation.
  const Split split{
      std::vector<uint8_t>(pixels, pixels + model.input_floats()), {0}, model.input_shape()};
  BatchLoader loader(split, 1);
  loader.reset_in_order();
  const float* logits = model.forward(loader.next().x, 1, Context{});
  std::vector<float> p(logits, logits + model.classes());
  softmax_rows(p.data(), 1, model.classes());
  return p;
}

std::vector<Guess> top_classes(Model& model, const uint8_t* pixels, int k) {
  const int classes = model.classes(), top = std::min(k, classes);
  const std::vector<float> p = class_probabilities(model, pixels);
  std::vector<int> order(static_cast<size_t>(classes));
  std::iota(order.begin(), order.end(), 0);
  // Ties to the lower label, as the first largest probability is the class elsewhere.
  std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int a, int b) {
    return p[size_t(a)] > p[size_t(b)] || (p[size_t(a)] == p[size_t(b)] && a < b);
  });
  std::vector<Guess> guesses;
  for (int i = 0; i < top; ++i) guesses.push_back({order[size_t(i)], p[size_t(order[size_t(i)])]});
  return guesses;
}

}  // namespace pitrain
