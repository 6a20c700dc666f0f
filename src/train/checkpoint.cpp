#include "pitrain/checkpoint.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "pitrain/dataset.h"
#include "pitrain/error.h"
#include "pitrain/guard.h"
#include "pitrain/h5.h"
#include "pitrain/keras.h"
#include "pitrain/layer_registry.h"
#include "pitrain/paths.h"
#include "pitrain/text.h"

namespace pitrain {
namespace {

// Keras' HDF5 weights layout, as its model.save("x.h5") writes it and load_weights("x.h5") reads
// it: /model_weights/conv2d/conv2d/kernel:0, the layer group listing its datasets in its attribute
// weight_names ("conv2d/kernel:0"), the group listing the layers in layer_names.
std::string keras_weight_name(const std::string& layer, const ParamView& p) {
  return keras_weight_path(layer, p) + ":0";
}
std::string weight_path(const std::string& layer, const ParamView& p) {
  return "/model_weights/" + layer + "/" + keras_weight_name(layer, p);
}
// Checkpoints from before the Keras layout (/model_weights/conv2d/kernel, no layer_names) still
// load.
std::string weight_path_before_keras(const std::string& layer, const ParamView& p) {
  return "/model_weights/" + layer + "/" + p.name;
}

void write_weights(h5::File& f, const Model& model) {
  const auto names = model.layer_names();
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const std::string group = "/model_weights/" + names[i];
    f.create_group(group);  // also for a layer without weights: Keras looks each one up
    std::vector<std::string> weight_names;
    for (const auto& p : model.layers()[i]->params()) {
      weight_names.push_back(keras_weight_name(names[i], p));
      std::vector<hsize_t> dims(p.shape.begin(), p.shape.end());
      f.write<float>(weight_path(names[i], p), dims,
                     model.params().data() + model.param_offset(i) + p.offset);
    }
    f.set_bytes_attr("weight_names", weight_names, group);
  }
  for (const char* object : {"/", "/model_weights"}) {
    f.set_bytes_attr("keras_version", kKerasVersion, object);
    f.set_bytes_attr("backend", kKerasBackend, object);
  }
  f.set_bytes_attr("layer_names", names, "/model_weights");
}

// A count attribute (epoch, step, ...): a whole number from 0 to 2^53, which a double holds
// exactly.
int64_t count_attr(const h5::File& f, const std::string& name) {
  const double v = f.attr_double(name);
  if (!(v >= 0 && v <= 9007199254740992.0 && std::floor(v) == v)) {
    throw Error(
        f.path() + ": attribute " + name + " is " + format_number("%g", v) +
        ", not a count (a whole number from 0); the checkpoint is damaged, resume from another");
  }
  return int64_t(v);
}

uint64_t seed_attr(const h5::File& f) {
  const std::string s = f.attr_string("seed");
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    throw Error(f.path() + ": attribute seed is '" + s +
                "', not a decimal number from 0 to 2^64-1; the checkpoint is damaged");
  return v;
}

using WeightPath = std::string (*)(const std::string& layer, const ParamView& p);

// Every weight dataset that the layers imply is in the file, in its shape, with the bytes it
// declares: a few bytes of model_spec may describe gigabytes of parameters.
void check_weights(const h5::File& f, const std::vector<std::unique_ptr<Layer>>& layers,
                   WeightPath path_of) {
  const auto names = keras_layer_names(layers);
  for (size_t i = 0; i < layers.size(); ++i)
    for (const auto& p : layers[i]->params()) {
      const std::string name = path_of(names[i], p);
      if (!f.exists(name))
        throw Error(
            f.path() + ": dataset " + name +
            " is missing, which its model_spec implies; the checkpoint is damaged or was edited");
      const auto dims = f.shape(name);
      if (std::vector<int64_t>(dims.begin(), dims.end()) != p.shape)
        throw Error(f.path() + ": dataset " + name + " has shape " + h5::dims_text(dims) +
                    ", expected " +
                    h5::dims_text(std::vector<hsize_t>(p.shape.begin(), p.shape.end())) +
                    " from its model_spec; the checkpoint is damaged or was edited");
      f.check_stored(name);
    }
}

// The images its model takes: input_shape, or a file from before it was kept, 28x28x1.
Shape checkpoint_input_shape(const h5::File& f) {
  if (!f.has_attr("input_shape")) return kDrawingShape;
  try {
    return parse_shape(f.attr_string("input_shape"), "attribute input_shape");
  } catch (const UsageError& e) {
    throw Error(f.path() + ": " + e.what() + "; the checkpoint is damaged or was edited");
  }
}

// The model its model_spec and class_names describe, built once the file holds every weight it
// implies and its parameters and `batch` rows of activations fit in memory (checked from the
// layers' shapes, before anything is allocated); an Error naming the file otherwise.
Model checkpoint_model(const h5::File& f, const std::vector<std::string>& class_names,
                       WeightPath path_of, int batch) {
  if (const auto problem = class_names_problem(class_names); !problem.empty())
    throw Error(f.path() + ": attribute class_names: " + problem + "; the checkpoint is damaged");
  const std::string spec = f.attr_string("model_spec");
  const int classes = int(class_names.size());
  const Shape input = checkpoint_input_shape(f);
  // Its words are about a --model flag: say it is this file's.
  auto not_this_file = [&](const Error& e) {
    return Error(f.path() + ": its model_spec does not fit its " + std::to_string(classes) +
                 " class_names (" + e.what() + "); the checkpoint is damaged or was edited");
  };
  std::vector<std::unique_ptr<Layer>> layers;
  try {
    layers = make_layers(spec, input, classes);
  } catch (const Error& e) {
    throw not_this_file(e);
  }
  check_weights(f, layers, path_of);
  check_model_fits_memory(
      layers, batch,
      f.path() + ": its model " + spec + " run on " + std::to_string(batch) + " rows at once",
      "use a machine with more memory, or a smaller --batch-size to resume");
  try {
    return Model(spec, classes, input);
  } catch (const Error& e) {
    throw not_this_file(e);
  }
}

// Everything a checkpoint holds, flushed to the file.
void write_contents(h5::File& f, const Model& model, Optimizer& opt, const RunState& state,
                    const std::vector<std::string>& class_names) {
  write_weights(f, model);
  for (auto& [name, buf] : opt.state())
    f.write<float>("/optimizer_weights/" + name, {hsize_t(buf->size())}, buf->data());
  f.set_attr("model_spec", model.spec());
  f.set_attr("input_shape", shape_text(model.input_shape()));
  f.set_attr("class_names", class_names);
  f.set_attr("optimizer", opt.name());
  f.set_attr("iterations", double(opt.iterations));
  f.set_attr("epoch", double(state.epoch));
  f.set_attr("step", double(state.step));
  f.set_attr("epoch_step", double(state.epoch_step));
  f.set_attr("steps_per_epoch", double(state.steps_per_epoch));
  f.set_attr("seed", std::to_string(state.seed));  // a string: a double cannot hold every uint64
  f.set_attr("created_by", "pitrain");
  f.flush();
}

}  // namespace

void save_checkpoint(const std::string& path, const Model& model, Optimizer& opt,
                     const RunState& state, const std::vector<std::string>& class_names) {
  write_beside(path, [&](const std::string& tmp) {
    auto f = h5::File::create(tmp, true);  // exclusive: never another writer's file
    write_contents(f, model, opt, state, class_names);
  });
}

Checkpoint load_checkpoint(const std::string& path, int batch) {
  auto f = h5::File::open_read(path);
  if (!f.has_attr("model_spec") || !f.exists("/model_weights"))
    throw Error(path +
                ": not a pitrain checkpoint (no model_spec or /model_weights); give a file written "
                "by `pitrain train --checkpoint`");
  const auto class_names = f.attr_strings("class_names");
  const WeightPath path_of =
      f.has_attr("layer_names", "/model_weights") ? weight_path : weight_path_before_keras;
  Checkpoint c{checkpoint_model(f, class_names, path_of, batch), class_names, {}, "", 0, {}};
  const auto names = c.model.layer_names();
  for (size_t i = 0; i < c.model.layers().size(); ++i)
    for (const auto& p : c.model.layers()[i]->params()) {  // each checked by checkpoint_model
      const auto w = f.read_all<float>(path_of(names[i], p));
      std::copy(w.begin(), w.end(), c.model.params().begin() + c.model.param_offset(i) + p.offset);
    }
  if (const auto bad = first_non_finite_layer(c.model, c.model.params()); !bad.empty())
    throw Error(path + ": the weights of " + bad +
                " hold NaN or Inf; the checkpoint is damaged, resume from another");
  c.optimizer = f.attr_string("optimizer");
  c.iterations = count_attr(f, "iterations");
  c.state.epoch = count_attr(f, "epoch");
  c.state.step = count_attr(f, "step");
  c.state.epoch_step = f.has_attr("epoch_step") ? count_attr(f, "epoch_step") : 0;
  c.state.steps_per_epoch = f.has_attr("steps_per_epoch") ? count_attr(f, "steps_per_epoch") : 0;
  c.state.seed = seed_attr(f);
  // Every optimizer state buffer is one float a parameter: check before reading what the file
  // declares.
  const hsize_t n = hsize_t(c.model.num_params());
  // The optimizer's own names (Optimizer::state).
  for (const auto& name : f.members("/optimizer_weights")) {
    const std::string ds = "/optimizer_weights/" + name;
    if (f.shape(ds) != std::vector<hsize_t>{n})
      throw Error(path + ": " + ds + " does not have the shape (" + std::to_string(n) +
                  ",) of the model's parameters (corrupt checkpoint)");
    c.optimizer_state[name] = f.read_all<float>(ds);
  }
  return c;
}

void restore_optimizer(const Checkpoint& ckpt, Optimizer& opt, const std::string& path) {
  if (ckpt.optimizer != opt.name())
    throw UsageError(path + ": checkpoint was trained with --optimizer " + ckpt.optimizer +
                     "; resume with the same");
  for (auto& [name, buf] : opt.state()) {
    auto it = ckpt.optimizer_state.find(name);
    if (it == ckpt.optimizer_state.end() || it->second.size() != buf->size())
      throw Error(path + ": optimizer state " + name +
                  " is missing or has the wrong size (corrupt checkpoint)");
    *buf = it->second;
  }
  opt.iterations = ckpt.iterations;
}

}  // namespace pitrain
