#include <filesystem>
#include <vector>

#include "pitrain/error.h"
#include "pitrain/export.h"
#include "pitrain/keras.h"
#include "pitrain/paths.h"
#include "pitrain/text.h"

namespace pitrain {
namespace {

constexpr const char* kShard = "group1-shard1of1.bin";

// What model.json's metadata says the input is.
std::string input_text(const Shape& s) {
  const std::string dims =
      "(N, " + std::to_string(s.h) + ", " + std::to_string(s.w) + ", " + std::to_string(s.c) + ")";
  if (s == kDrawingShape)
    return "float32 " + dims +
           ": 28x28 grayscale images, row by row, channels-last, each pixel / 255 (0 black, 1 "
           "white), light drawing on black as in the training data";
  return "float32 " + dims + ": " + std::to_string(s.h) + "x" + std::to_string(s.w) +
         " images of " + std::to_string(s.c) +
         " channel(s), row by row, channels-last, each value / 255, as in "
         "the training data";
}

nlohmann::ordered_json metadata(const Checkpoint& ckpt) {
  return {
      {"class_names", ckpt.class_names},
      {"input", input_text(ckpt.model.input_shape())},
      {"output",
       "float32 (N, classes): the probability of each class, in the order of class_names"},
      {"model_spec", ckpt.model.spec()},
      {"epoch", ckpt.state.epoch},
      {"step", ckpt.state.step},
  };
}

}  // namespace

void export_tfjs(const Checkpoint& ckpt, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::is_directory(dir))
    throw Error("--tfjs " + dir + ": cannot make this folder (" +
                (ec ? ec.message() : "a file is in the way") + "); give a new or existing folder");
  const Model& model = ckpt.model;
  const auto names = model.layer_names();
  nlohmann::ordered_json weights = nlohmann::ordered_json::array();
  std::vector<float> shard;  // the weights in manifest order
  for (size_t i = 0; i < model.layers().size(); ++i)
    for (const auto& p : model.layers()[i]->params()) {
      weights.push_back(
          {{"name", keras_weight_path(names[i], p)}, {"shape", p.shape}, {"dtype", "float32"}});
      const auto first = model.params().begin() + model.param_offset(i) + p.offset;
      shard.insert(shard.end(), first, first + p.size());
    }
  // Each file is written beside and put in place: a reader never sees half a file.
  write_file_atomically(dir + "/" + kShard, {reinterpret_cast<const char*>(shard.data()),
                                             shard.size() * sizeof(float)});
  const nlohmann::ordered_json json = {
      {"format", "layers-model"},
      {"generatedBy", "pitrain"},
      {"convertedBy", nullptr},
      {"modelTopology",
       {{"keras_version", kKerasVersion},
        {"backend", kKerasBackend},
        {"model_config", keras_model_config(model)}}},
      {"weightsManifest", {{{"paths", {kShard}}, {"weights", weights}}}},
      {"userDefinedMetadata", metadata(ckpt)},
  };
  const std::string text = json_text(json, 1);
  write_file_atomically(dir + "/model.json", text);
}

}  // namespace pitrain
