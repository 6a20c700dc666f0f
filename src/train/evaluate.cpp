#include "pitrain/evaluate.h"

#include <algorithm>

#include "pitrain/error.h"

namespace pitrain {

namespace {
constexpr int kEvalBatch = 256;
}

Evaluation evaluate(Model& model, const Split& local, Comm& comm) {
  const int classes = model.classes();
  // [loss sum, correct, count, confusion...]: one allreduce for all of it.
  std::vector<double> sums(3 + size_t(classes) * classes, 0.0);
  BatchLoader loader(local, kEvalBatch);
  const Context ctx{false, 0};
  for (loader.reset_in_order(); loader.has_next();) {
    const Batch b = loader.next();
    const float* logits = model.forward(b.x, b.n, ctx);
    const LossStats st = softmax_cross_entropy(logits, b.y, b.n, classes, nullptr, 0.0f);
    sums[0] += st.loss_sum;
    sums[1] += double(st.correct);
    sums[2] += b.n;
    for (int i = 0; i < b.n; ++i) {
      const float* z = logits + int64_t(i) * classes;
      sums[3 + size_t(b.y[i]) * classes + size_t(std::max_element(z, z + classes) - z)] += 1;
    }
  }
  comm.allreduce_sum(sums.data(), int64_t(sums.size()));
  Evaluation e;
  e.classes = classes;
  e.count = int64_t(sums[2]);
  if (e.count == 0) throw Error("evaluate: the split has no images");
  e.loss = sums[0] / sums[2];
  e.accuracy = sums[1] / sums[2];
  for (size_t i = 3; i < sums.size(); ++i) e.confusion.push_back(int64_t(sums[i]));
  return e;
}

}  // namespace pitrain
