// The table of layer types, and the argument parsing their factories share.
#include "pitrain/layer_registry.h"

#include "pitrain/error.h"

namespace pitrain {

// Each in its layer's .cpp file.
std::unique_ptr<Layer> make_conv2d(const LayerCall& call);
std::unique_ptr<Layer> make_maxpool2d(const LayerCall& call);
std::unique_ptr<Layer> make_flatten(const LayerCall& call);
std::unique_ptr<Layer> make_dropout(const LayerCall& call);
std::unique_ptr<Layer> make_dense(const LayerCall& call);
std::unique_ptr<Layer> make_relu(const LayerCall& call);

const std::vector<LayerType>& layer_types() {
  // In the order the unknown-layer error lists them.
  static const std::vector<LayerType> types = {
      // token       Keras class     Keras name       usage
      {"conv2d", "Conv2D", "conv2d", "FILTERS,K[,same][,relu]", make_conv2d},
      {"maxpool2d", "MaxPooling2D", "max_pooling2d", "", make_maxpool2d},
      {"flatten", "Flatten", "flatten", "", make_flatten},
      {"dropout", "Dropout", "dropout", "RATE", make_dropout},
      {"dense", "Dense", "dense", "UNITS|classes[,relu|softmax]", make_dense},
      {"relu", "ReLU", "re_lu", "", make_relu},
  };
  return types;
}

const LayerType* find_layer_type(const std::string& token) {
  for (const auto& t : layer_types())
    if (token == t.token) return &t;
  return nullptr;
}

std::string spec_text(const LayerType& type, const std::string& args) {
  return type.token + (args.empty() ? "" : "(" + args + ")");
}

void expect_args(const LayerCall& call, size_t lo, size_t hi) {
  const size_t got = call.args.size();
  if (got < lo || got > hi)
    throw UsageError("model spec: " + std::string(call.type.token) + " takes " +
                     std::to_string(lo) + " to " + std::to_string(hi) + " arguments, got " +
                     std::to_string(got) + " (usage: " + spec_text(call.type, call.type.usage) +
                     ")");
}

int positive_int(const LayerCall& call, const std::string& arg) {
  if (arg == "classes") return call.classes;
  try {
    size_t used = 0;
    const int v = std::stoi(arg, &used);
    if (used == arg.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("model spec: " + std::string(call.type.token) + ": '" + arg +
                   "' is not a positive integer");
}

Activation activation(const LayerCall& call, const std::string& arg) {
  if (arg == "relu") return Activation::relu;
  if (arg == "softmax") return Activation::softmax;
  throw UsageError("model spec: " + std::string(call.type.token) + ": unknown argument '" + arg +
                   "' (expected relu, softmax or same)");
}

float rate(const LayerCall& call, const std::string& arg) {
  float r = -1;
  try {
    size_t used = 0;
    r = std::stof(arg, &used);
    if (used != arg.size()) r = -1;  // "0.5abc" is no rate
  } catch (const std::exception&) {
  }
  if (!(r >= 0 && r < 1))
    throw UsageError("model spec: " + std::string(call.type.token) + " rate '" + arg +
                     "' must be in [0, 1)");
  return r;
}

std::string activation_arg(Activation act) {
  return act == Activation::relu ? ",relu" : act == Activation::softmax ? ",softmax" : "";
}

const char* keras_activation(Activation act) {
  return act == Activation::relu ? "relu" : act == Activation::softmax ? "softmax" : "linear";
}

}  // namespace pitrain
