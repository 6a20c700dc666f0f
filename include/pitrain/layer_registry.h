// The one table of layer types: a row per type gives its spec token, its Keras class and name,
// its arguments' usage and the factory that builds it. The spec parser, Model::layer_names()
// (checkpoint names), summary and the error texts all read it. A new layer type is one row
// here plus one .cpp file holding its class and its factory.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "pitrain/layers.h"

namespace pitrain {

// What a factory builds a layer from: its row, its spec arguments and where it sits.
struct LayerCall {
  const LayerType& type;
  const std::vector<std::string>& args;  // as written, spaces trimmed
  Shape in;                              // the previous layer's output, or the model input
  int classes;                           // what the argument "classes" stands for
  int index;                             // position in the model: Dropout's mask stream
};

// Parses call.args, checks they fit call.in, builds the layer; throws UsageError otherwise.
using LayerFactory = std::unique_ptr<Layer> (*)(const LayerCall& call);

struct LayerType {
  const char* token;        // in specs: "maxpool2d"
  const char* keras_class;  // in summary: "MaxPooling2D"
  const char* keras_name;  // layer names and checkpoint groups: max_pooling2d, max_pooling2d_1, ...
  const char* usage;       // its arguments, for the arg-count error: "FILTERS,K[,same][,relu]"
  LayerFactory make;
};

const std::vector<LayerType>& layer_types();
const LayerType* find_layer_type(const std::string& token);             // null when unknown
std::string spec_text(const LayerType& type, const std::string& args);  // token or token(args)

// Argument parsing shared by the factories; errors name the layer and the argument.
void expect_args(const LayerCall& call, size_t lo, size_t hi);
int positive_int(const LayerCall& call, const std::string& arg);       // or "classes"
Activation activation(const LayerCall& call, const std::string& arg);  // relu or softmax
float rate(const LayerCall& call, const std::string& arg);             // in [0, 1)
std::string activation_arg(Activation act);    // ",relu", ",softmax" or "": a spec argument's text
const char* keras_activation(Activation act);  // "relu", "softmax" or "linear": Keras' name

// Spec text to layers (spec.cpp), built-in model names expanded; throws UsageError naming the
// bad token. make_layer builds one layer, e.g. make_layer("conv2d(3,3)", {7, 6, 2}, 10).
std::vector<std::unique_ptr<Layer>> make_layers(const std::string& name_or_spec, Shape in,
                                                int classes);
std::unique_ptr<Layer> make_layer(const std::string& layer_spec, Shape in, int classes,
                                  int index = 0);

}  // namespace pitrain
