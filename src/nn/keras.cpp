#include "pitrain/keras.h"

#include "pitrain/layer_registry.h"

namespace pitrain {

std::string keras_weight_path(const std::string& layer_name, const ParamView& p) {
  return layer_name + "/" + p.name;
}

void add_keras_kernel_config(nlohmann::ordered_json& config) {
  config["use_bias"] = true;
  config["kernel_initializer"] = {{"class_name", "GlorotUniform"}, {"config", {{"seed", nullptr}}}};
  config["bias_initializer"] = {{"class_name", "Zeros"},
                                {"config", nlohmann::ordered_json::object()}};
  for (const char* key : {"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                          "kernel_constraint", "bias_constraint"})
    config[key] = nullptr;
}

namespace {

// `input`: the first layer's, which Keras writes as batch_input_shape; null on the others.
nlohmann::ordered_json layer_entry(const std::string& keras_class, const std::string& name,
                                   const Shape* input, const Layer* layer) {
  nlohmann::ordered_json config = {{"name", name}, {"trainable", true}};
  if (input) config["batch_input_shape"] = {nullptr, input->h, input->w, input->c};
  config["dtype"] = "float32";
  if (layer) layer->keras_config(config);
  return {{"class_name", keras_class}, {"config", config}};
}

}  // namespace

nlohmann::ordered_json keras_model_config(const Model& model) {
  const auto names = model.layer_names();
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& l = *model.layers()[i];
    layers.push_back(
        layer_entry(l.type().keras_class, names[i], i == 0 ? &model.input_shape() : nullptr, &l));
  }
  const auto& last = layers.back()["config"];
  if (!(last.contains("activation") && last["activation"] == "softmax")) {
    auto softmax = layer_entry("Activation", "activation", nullptr, nullptr);
    softmax["config"]["activation"] = "softmax";
    layers.push_back(softmax);
  }
  return {{"class_name", "Sequential"}, {"config", {{"name", "sequential"}, {"layers", layers}}}};
}

}  // namespace pitrain
