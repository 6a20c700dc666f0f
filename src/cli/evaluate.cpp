#include <algorithm>
#include <cstdio>
#include <optional>

#include "pitrain/checkpoint.h"
#include "pitrain/cli.h"
#include "pitrain/dataset.h"
#include "pitrain/error.h"
#include "pitrain/evaluate.h"
#include "pitrain/threaded_model.h"

namespace pitrain::cli {

int evaluate(int argc, char** argv, Comm& comm) {
  std::string model_path, data_path, split;
  cxxopts::Options options = command_options(
      "evaluate",
      "Loss, accuracy, per-class accuracy and confusion matrix of a checkpoint on a dataset");
  options.add_options()(
      "model", "Checkpoint from `pitrain train --checkpoint` (required; rank 0 alone reads it)",
      cxxopts::value(model_path),
      "FILE")("data", "Dataset from `pitrain prepare`, of the checkpoint's classes (required)",
              cxxopts::value(data_path),
              "FILE")("split", "train or val", cxxopts::value(split)->default_value("val"), "NAME");
  cxxopts::ParseResult r;
  if (!parse(options, argc, argv, comm, r)) return 0;
  require(!model_path.empty() && !data_path.empty(),
          "evaluate: --model FILE.h5 and --data FILE.h5 are required");
  require(split == "train" || split == "val", "evaluate: --split must be train or val");
  // Only rank 0 reads the checkpoint, as training writes it: on Pis it is on rank 0's disk alone.
  std::optional<Checkpoint> ckpt;
  RankSlice slice;
  std::string spec;
  run_together(comm, [&] {
    slice = load_rank_slice(data_path, split, comm.rank(), comm.size());
    if (comm.rank() != 0) return;
    ckpt.emplace(load_checkpoint(model_path, kEvalBatch));
    if (slice.class_names != ckpt->class_names)
      throw Error(
          data_path +
          ": class_names differ from the checkpoint's; evaluate on data of the same classes");
    if (ckpt->model.input_shape() != slice.data.shape)
      throw Error(data_path + ": images of " + shape_text(slice.data.shape) + ", but " +
                  model_path + " takes " + shape_text(ckpt->model.input_shape()) +
                  "; evaluate on data of the shape it was trained on");
    spec = ckpt->model.spec();
  });
  check_same_dataset(comm, data_path, split, slice);
  comm.broadcast(spec);
  Model model =
      ckpt ? std::move(ckpt->model) : Model(spec, int(slice.class_names.size()), slice.data.shape);
  comm.broadcast(model.params().data(), model.num_params());
  ThreadPool pool(default_threads());
  ThreadedModel threaded(model, pool);
  const Evaluation e = pitrain::evaluate(threaded, slice, comm);
  if (comm.rank() != 0) return 0;
  const auto& names = slice.class_names;
  const int c = e.classes;
  std::printf("%s split: %lld images, loss %.4f, accuracy %.4f\n\n%-16s %8s %8s\n", split.c_str(),
              (long long)e.count, e.loss, e.accuracy, "class", "images", "accuracy");
  for (int i = 0; i < c; ++i) {
    int64_t row = 0;
    for (int j = 0; j < c; ++j) row += e.confusion[size_t(i * c + j)];
    std::printf("%-16s %8lld %8.4f\n", names[size_t(i)].c_str(), (long long)row,
                row ? double(e.confusion[size_t(i * c + i)]) / double(row) : 0.0);
  }
  std::printf("\nconfusion matrix (rows: true class, columns: predicted, in the order above)\n");
  for (int i = 0; i < c; ++i) {
    std::printf("%-16.16s", names[size_t(i)].c_str());
    for (int j = 0; j < c; ++j) std::printf(" %5lld", (long long)e.confusion[size_t(i * c + j)]);
    std::printf("\n");
  }
  return 0;
}

}  // namespace pitrain::cli
