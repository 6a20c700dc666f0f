// Loss, accuracy and confusion matrix of a model over a split that the ranks share.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "pitrain/comm.h"
#include "pitrain/dataset.h"
#include "pitrain/threaded_model.h"

namespace pitrain {

struct Evaluation {
  int classes = 0;
  int64_t count = 0;
  double loss = 0, accuracy = 0;
  std::vector<int64_t> confusion;  // (classes, classes): row = true label, column = prediction
};

// Rows run through the model at once (a load_checkpoint for evaluate checks their memory).
constexpr int kEvalBatch = 256;

// Every rank evaluates its slice; the sums are allreduced, so every rank gets the whole figure.
Evaluation evaluate(ThreadedModel& model, const Split& local, Comm& comm);
// `each_batch`: called after each batch (fit's stall watchdog: a long validation is progress).
Evaluation evaluate(ThreadedModel& model, const RankSlice& local, Comm& comm,
                    const std::function<void()>& each_batch = nullptr);

}  // namespace pitrain
