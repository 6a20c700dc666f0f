// Model specs: a built-in name, or layers separated by spaces, each `name` or `name(args)`:
//   conv2d(FILTERS,K[,same][,relu])  maxpool2d  flatten  dropout(RATE)  relu
//   dense(UNITS|classes[,relu|softmax])
// e.g. "conv2d(32,3,relu) maxpool2d flatten dense(classes,softmax)".
#include <map>
#include <sstream>

#include "pitrain/error.h"
#include "pitrain/model.h"

namespace pitrain {
namespace {

const std::map<std::string, std::string> kBuiltins = {
    // Keras' "simple MNIST convnet".
    {"cnn", "conv2d(32,3,relu) maxpool2d conv2d(64,3,relu) maxpool2d flatten dropout(0.5) dense(classes,softmax)"},
    // The magazine's Raspberry Pi model.
    {"mlp", "flatten dense(256,relu) dropout(0.2) dense(classes,softmax)"},
    // The peer's third model: the convnet with a 128-unit hidden layer.
    {"cnn128",
     "conv2d(32,3,relu) maxpool2d conv2d(64,3,relu) maxpool2d flatten dense(128,relu) dropout(0) dense(classes,softmax)"},
};

struct LayerSpec {
  std::string name;
  std::vector<std::string> args;
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
    while (i < spec.size() && (std::isalnum(static_cast<unsigned char>(spec[i])) || spec[i] == '_')) l.name += spec[i++];
    if (l.name.empty()) throw UsageError("model spec: unexpected '" + std::string(1, spec[i]) + "' in \"" + spec + "\"");
    if (i < spec.size() && spec[i] == '(') {
      const size_t close = spec.find(')', i);
      if (close == std::string::npos) throw UsageError("model spec: missing ')' after " + l.name);
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

int positive_int(const LayerSpec& l, const std::string& a, int classes) {
  if (a == "classes") return classes;
  try {
    size_t used = 0;
    const int v = std::stoi(a, &used);
    if (used == a.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("model spec: " + l.name + ": '" + a + "' is not a positive integer");
}

Activation activation(const LayerSpec& l, const std::string& a) {
  if (a == "relu") return Activation::relu;
  if (a == "softmax") return Activation::softmax;
  throw UsageError("model spec: " + l.name + ": unknown argument '" + a + "' (expected relu, softmax or same)");
}

std::unique_ptr<Layer> make_layer(const LayerSpec& l, Shape in, int classes, int index) {
  auto nargs = [&](size_t lo, size_t hi) {
    if (l.args.size() < lo || l.args.size() > hi)
      throw UsageError("model spec: " + l.name + " takes " + std::to_string(lo) + " to " + std::to_string(hi) +
                       " arguments, got " + std::to_string(l.args.size()));
  };
  if (l.name == "conv2d") {
    nargs(2, 4);
    const int filters = positive_int(l, l.args[0], classes), k = positive_int(l, l.args[1], classes);
    bool same = false;
    Activation act = Activation::none;
    for (size_t i = 2; i < l.args.size(); ++i) {
      if (l.args[i] == "same" || l.args[i] == "valid") same = l.args[i] == "same";
      else act = activation(l, l.args[i]);
    }
    if (act == Activation::softmax) throw UsageError("model spec: conv2d cannot end in softmax");
    if (!same && (in.h < k || in.w < k))
      throw UsageError("model spec: conv2d(" + l.args[0] + "," + l.args[1] + ") does not fit its " + std::to_string(in.h) +
                       "x" + std::to_string(in.w) + " input");
    return std::make_unique<Conv2D>(in, filters, k, same, act);
  }
  if (l.name == "maxpool2d") {
    nargs(0, 0);
    if (in.h < 2 || in.w < 2) throw UsageError("model spec: maxpool2d needs an input of at least 2x2");
    return std::make_unique<MaxPool2D>(in);
  }
  if (l.name == "dense") {
    nargs(1, 2);
    const int units = positive_int(l, l.args[0], classes);
    const Activation act = l.args.size() == 2 ? activation(l, l.args[1]) : Activation::none;
    if (in.h != 1 || in.w != 1) throw UsageError("model spec: dense needs a flat input; put flatten before it");
    return std::make_unique<Dense>(in, units, act);
  }
  if (l.name == "flatten") return nargs(0, 0), std::make_unique<Flatten>(in);
  if (l.name == "relu") return nargs(0, 0), std::make_unique<ReLU>(in);
  if (l.name == "dropout") {
    nargs(1, 1);
    float rate = -1;
    try {
      rate = std::stof(l.args[0]);
    } catch (const std::exception&) {
    }
    if (!(rate >= 0 && rate < 1)) throw UsageError("model spec: dropout rate '" + l.args[0] + "' must be in [0, 1)");
    return std::make_unique<Dropout>(in, rate, index);
  }
  throw UsageError("model spec: unknown layer or model '" + l.name +
                   "' (models: cnn, mlp, cnn128; layers: conv2d, maxpool2d, flatten, dropout, dense, relu)");
}

}  // namespace

std::string expand_model_spec(const std::string& name_or_spec) {
  auto it = kBuiltins.find(name_or_spec);
  return it == kBuiltins.end() ? name_or_spec : it->second;
}

Model::Model(const std::string& name_or_spec, int classes) : classes_(classes) {
  if (classes < 2) throw UsageError("model: need at least 2 classes, got " + std::to_string(classes));
  Shape shape{28, 28, 1};
  const auto tokens = tokenize(expand_model_spec(name_or_spec));
  if (tokens.empty()) throw UsageError("model spec is empty; use cnn, mlp or a layer list");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].name == "dense" && tokens[i].args.size() == 2 && tokens[i].args[1] == "softmax" && i + 1 != tokens.size())
      throw UsageError("model spec: softmax only on the last dense layer");
    layers_.push_back(make_layer(tokens[i], shape, classes, int(i)));
    shape = layers_.back()->output_shape();
    spec_ += (i ? " " : "") + layers_.back()->describe();
  }
  if (!(shape == Shape{1, 1, classes}))
    throw UsageError("model spec: the last layer gives " + std::to_string(shape.size()) + " outputs per image, expected " +
                     std::to_string(classes) + " (one per class; end with dense(classes,softmax))");
  int64_t total = 0;
  for (auto& l : layers_) offsets_.push_back(total), total += l->num_params();
  if (total > (int64_t(1) << 30))
    throw UsageError("model spec: " + std::to_string(total) + " parameters is more than this tool is meant for (2^30)");
  params_.assign(size_t(total), 0.0f);
  grads_.assign(size_t(total), 0.0f);
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->bind(params_.data() + offsets_[i], grads_.data() + offsets_[i]);
}

}  // namespace pitrain
