// What Keras calls our models' parts, for the files Keras and TensorFlow.js read: the
// checkpoint's weights group (checkpoint.h) and `pitrain export --tfjs` (export.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "pitrain/layers.h"
#include "pitrain/model.h"

namespace pitrain {

// The Keras release whose file formats ours follow (its weights are named "conv2d/kernel:0"),
// and its backend. Keras reads both only to convert files of Keras 1 or Theano.
constexpr const char* kKerasVersion = "2.15.0";
constexpr const char* kKerasBackend = "tensorflow";

// A weight's path in Keras: "conv2d_1/kernel" (TensorFlow.js' name; TensorFlow's variable adds
// ":0").
std::string keras_weight_path(const std::string& layer_name, const ParamView& p);

// Dense's and Conv2D's shared config tail: use_bias, Keras' default initializers (ours,
// layers.h), no regularizers or constraints.
void add_keras_kernel_config(nlohmann::ordered_json& config);

// The model as Keras serialises a Sequential: {"class_name": "Sequential", "config": {"name":
// "sequential", "layers": [...]}}, input (None, 28, 28, 1) on the first layer. Its output is the
// class probabilities, as `pitrain predict` prints them: when the last layer is not a softmax
// dense, a Keras Activation("softmax") layer follows it.
nlohmann::ordered_json keras_model_config(const Model& model);

}  // namespace pitrain
