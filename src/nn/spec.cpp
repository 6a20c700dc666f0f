// Model specs: a built-in name, or layers separated by spaces, each `token` or `token(args)`,
// e.g. "conv2d(32,3,relu) maxpool2d flatten dense(classes,softmax)". The tokens and their
// arguments are the rows of the layer registry (registry.cpp).
#include <sstream>
#include <utility>

#include "pitrain/error.h"
#include "pitrain/layer_registry.h"
#include "pitrain/model.h"

namespace pitrain {
namespace {

// In the order the unknown-layer error lists them.
const std::vector<std::pair<std::string, std::string>> kBuiltins = {
    // Keras' "simple MNIST convnet".
    {"cnn",
     "conv2d(32,3,relu) maxpool2d conv2d(64,3,relu) maxpool2d flatten dropout(0.5) "
     "dense(classes,softmax)"},
    // The magazine's Raspberry Pi model.
    {"mlp", "flatten dense(256,relu) dropout(0.2) dense(classes,softmax)"},
    // The peer's third model: the convnet with a 128-unit hidden layer.
    {"cnn128",
     "conv2d(32,3,relu) maxpool2d conv2d(64,3,relu) maxpool2d flatten dense(128,relu) dropout(0) "
     "dense(classes,softmax)"},
};

// A layer as written: {"conv2d", {"32", "3", "relu"}}.
struct LayerSpec {
  std::string token;
  std::vector<std::string> args;  // spaces trimmed
};

std::vector<LayerSpec> tokenize(const std::string& spec) {
  std::vector<LayerSpec> out;
  size_t i = 0;
  while (i < spec.size()) {
    if (std::isspace(static_cast<unsigned char>(spec[i]))) {
      ++i;
      continue;
    }
    LayerSpec l;
    while (i < spec.size() && (std::isalnum(static_cast<unsigned char>(spec[i])) || spec[i] == '_'))
      l.token += spec[i++];
    if (l.token.empty())
      throw UsageError("model spec: unexpected '" + std::string(1, spec[i]) + "' in \"" + spec +
                       "\"");
    if (i < spec.size() && spec[i] == '(') {
      const size_t close = spec.find(')', i);
      if (close == std::string::npos) throw UsageError("model spec: missing ')' after " + l.token);
      std::stringstream ss(spec.substr(i + 1, close - i - 1));
      std::string a;
      while (std::getline(ss, a, ',')) {
        a.erase(0, a.find_first_not_of(' '));
        a.erase(a.find_last_not_of(' ') + 1);
        l.args.push_back(a);
      }
      i = close + 1;
    }
    out.push_back(l);
  }
  return out;
}

std::string unknown_layer(const std::string& token) {
  std::string models, layers;
  for (const auto& b : kBuiltins) models += (models.empty() ? "" : ", ") + b.first;
  for (const auto& t : layer_types()) layers += (layers.empty() ? "" : ", ") + std::string(t.token);
  return "model spec: unknown layer or model '" + token + "' (models: " + models +
         "; layers: " + layers + ")";
}

std::unique_ptr<Layer> make_layer(const LayerSpec& l, Shape in, int classes, int index) {
  const LayerType* type = find_layer_type(l.token);
  if (!type) throw UsageError(unknown_layer(l.token));
  return type->make({*type, l.args, in, classes, index});
}

}  // namespace

std::string expand_model_spec(const std::string& name_or_spec) {
  for (const auto& b : kBuiltins)
    if (b.first == name_or_spec) return b.second;
  return name_or_spec;
}

std::vector<std::unique_ptr<Layer>> make_layers(const std::string& name_or_spec, Shape in,
                                                int classes) {
  const auto tokens = tokenize(expand_model_spec(name_or_spec));
  if (tokens.empty()) throw UsageError("model spec is empty; use cnn, mlp or a layer list");
  std::vector<std::unique_ptr<Layer>> layers;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].token == "dense" && tokens[i].args.size() == 2 &&
        tokens[i].args[1] == "softmax" && i + 1 != tokens.size())
      throw UsageError("model spec: softmax only on the last dense layer");
    layers.push_back(make_layer(tokens[i], in, classes, int(i)));
    in = layers.back()->output_shape();
    // Checked here, before the next layer counts them: a flatten of over 2^31 would wrap its int.
    if (in.size() > (int64_t(1) << 30))
      throw UsageError("model spec: " + layers.back()->spec() + " gives " +
                       std::to_string(in.size()) +
                       " values per image, more than this tool is meant for (2^30); use fewer "
                       "filters or pool first");
  }
  return layers;
}

std::unique_ptr<Layer> make_layer(const std::string& layer_spec, Shape in, int classes, int index) {
  const auto tokens = tokenize(layer_spec);
  if (tokens.size() != 1) throw UsageError("model spec: \"" + layer_spec + "\" is not one layer");
  return make_layer(tokens[0], in, classes, index);
}

}  // namespace pitrain
