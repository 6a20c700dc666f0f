#include "pitrain/evaluate.h"

#include <algorithm>

#include "pitrain/error.h"

namespace pitrain {

namespace {

Evaluation evaluate_batches(ThreadedModel& model, BatchLoader& loader, Comm& comm,
                            const std::function<void()>& each_batch) {
  const int classes = model.model().classes();
  // [loss sum, correct, count, confusion...]: one allreduce for all of it. A row a share,
  // added in share order, so the figures do not depend on timing.
  const size_t width = 3 + size_t(classes) * classes;
  std::vector<std::vector<double>> by_share(size_t(model.shares(kEvalBatch)),
                                            std::vector<double>(width, 0.0));
  for (loader.reset_in_order(); loader.has_next();) {
    const Batch b = loader.next();
    model.forward(b.x, b.n, [&](int s, const float* logits, int first, int rows) {
      std::vector<double>& sums = by_share[size_t(s)];
      const int32_t* y = b.y + first;
      const LossStats st = softmax_cross_entropy(logits, y, rows, classes, nullptr, 0.0f);
      sums[0] += st.loss_sum;
      sums[1] += double(st.correct);
      sums[2] += rows;
      for (int i = 0; i < rows; ++i) {
        const float* z = logits + int64_t(i) * classes;
        sums[3 + size_t(y[i]) * classes + size_t(std::max_element(z, z + classes) - z)] += 1;
      }
    });
    if (each_batch) each_batch();
  }
  std::vector<double> sums = by_share[0];
  for (size_t s = 1; s < by_share.size(); ++s)
    for (size_t i = 0; i < width; ++i) sums[i] += by_share[s][i];
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

}  // namespace

Evaluation evaluate(ThreadedModel& model, const Split& local, Comm& comm) {
  BatchLoader loader(local, kEvalBatch);
  return evaluate_batches(model, loader, comm, nullptr);
}

Evaluation evaluate(ThreadedModel& model, const RankSlice& local, Comm& comm,
                    const std::function<void()>& each_batch) {
  BatchLoader loader(local, kEvalBatch);
  return evaluate_batches(model, loader, comm, each_batch);
}

}  // namespace pitrain
