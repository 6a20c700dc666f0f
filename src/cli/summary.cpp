#include <cstdio>

#include "pitrain/cli.h"
#include "pitrain/layer_registry.h"
#include "pitrain/model.h"

namespace pitrain::cli {
namespace {

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return s;
}

}  // namespace

// Keras' model.summary(): layer (type), output shape, parameters, totals.
int summary(int argc, char** argv, Comm& comm) {
  cxxopts::Options options =
      command_options("summary", "Print a model's layers as Keras' model.summary() does");
  options.add_options()("model", "cnn, mlp, cnn128 or a layer list (see docs/data.md)",
                        cxxopts::value<std::string>()->default_value("cnn"), "SPEC")(
      "classes", "Number of classes", cxxopts::value<int>()->default_value("10"), "N")(
      "input", "Image shape HxWxC", cxxopts::value<std::string>()->default_value("28x28x1"),
      "SHAPE");
  cxxopts::ParseResult r;
  if (!parse(options, argc, argv, comm, r)) return 0;
  const std::string name = r["model"].as<std::string>();
  Model model(name, r["classes"].as<int>(), parse_shape(r["input"].as<std::string>(), "--input"));
  if (comm.rank() != 0) return 0;
  const std::string rule(70, '_'), double_rule(70, '=');
  std::printf("Model: \"%s\"\n%s\n %-33s%-26s%s\n%s\n",
              name.size() < 20 ? name.c_str() : "sequential", rule.c_str(), "Layer (type)",
              "Output Shape", "Param #", double_rule.c_str());
  const auto names = model.layer_names();
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const auto& l = model.layers()[i];
    const Shape s = l->output_shape();
    const std::string shape = s.flat ? "(None, " + std::to_string(s.c) + ")"
                                     : "(None, " + std::to_string(s.h) + ", " +
                                           std::to_string(s.w) + ", " + std::to_string(s.c) + ")";
    std::printf(" %-33s%-26s%s\n\n", (names[i] + " (" + l->type().keras_class + ")").c_str(),
                shape.c_str(), with_commas(l->num_params()).c_str());
  }
  std::printf("%s\nTotal params: %s\nTrainable params: %s\nNon-trainable params: 0\n%s\n",
              double_rule.c_str(), with_commas(model.num_params()).c_str(),
              with_commas(model.num_params()).c_str(), rule.c_str());
  return 0;
}

}  // namespace pitrain::cli
