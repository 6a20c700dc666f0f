#include "pitrain/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "pitrain/error.h"
#include "pitrain/h5.h"

namespace pitrain {
namespace {

std::string weight_path(const std::string& layer, const ParamView& p) { return "/model_weights/" + layer + "/" + p.name; }

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::string folder_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash + 1);
}

}  // namespace

void save_checkpoint(const std::string& path, const Model& model, Optimizer& opt, const RunState& state,
                     const std::vector<std::string>& class_names) {
  const std::string tmp = path + ".tmp";
  {
    auto f = h5::File::create(tmp);
    const auto names = model.layer_names();
    for (size_t i = 0; i < model.layers().size(); ++i)
      for (const auto& p : model.layers()[i]->params()) {
        std::vector<hsize_t> dims(p.shape.begin(), p.shape.end());
        f.write<float>(weight_path(names[i], p), dims, model.params().data() + model.param_offset(i) + p.offset);
      }
    for (auto& [name, buf] : opt.state())
      f.write<float>("/optimizer_weights/" + name, {hsize_t(buf->size())}, buf->data());
    f.set_attr("model_spec", model.spec());
    f.set_attr("class_names", class_names);
    f.set_attr("optimizer", opt.name());
    f.set_attr("iterations", double(opt.iterations));
    f.set_attr("epoch", double(state.epoch));
    f.set_attr("step", double(state.step));
    f.set_attr("epoch_step", double(state.epoch_step));
    f.set_attr("seed", std::to_string(state.seed));  // a string: a double cannot hold every uint64
    f.set_attr("created_by", "pitrain");
    f.flush();
  }
  fsync_path(tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(path + ": cannot replace checkpoint (" + std::strerror(errno) + ")");
  fsync_path(folder_of(path));  // make the rename itself durable
}

Checkpoint load_checkpoint(const std::string& path) {
  auto f = h5::File::open_read(path);
  if (!f.has_attr("model_spec") || !f.exists("/model_weights"))
    throw Error(path + ": not a pitrain checkpoint (no model_spec or /model_weights); give a file written by `pitrain train --checkpoint`");
  const auto class_names = f.attr_strings("class_names");
  Checkpoint c{Model(f.attr_string("model_spec"), int(class_names.size())), class_names, {}, "", 0, {}};
  const auto names = c.model.layer_names();
  for (size_t i = 0; i < c.model.layers().size(); ++i)
    for (const auto& p : c.model.layers()[i]->params()) {
      const std::string name = weight_path(names[i], p);
      const auto dims = f.shape(name);
      if (std::vector<int64_t>(dims.begin(), dims.end()) != p.shape)
        throw Error(path + ": " + name + " does not have the shape its model_spec implies (corrupt checkpoint)");
      const auto w = f.read_all<float>(name);
      std::copy(w.begin(), w.end(), c.model.params().begin() + c.model.param_offset(i) + p.offset);
    }
  c.optimizer = f.attr_string("optimizer");
  c.iterations = int64_t(f.attr_double("iterations"));
  c.state.epoch = int64_t(f.attr_double("epoch"));
  c.state.step = int64_t(f.attr_double("step"));
  c.state.epoch_step = f.has_attr("epoch_step") ? int64_t(f.attr_double("epoch_step")) : 0;
  c.state.seed = std::stoull(f.attr_string("seed"));
  for (const auto& name : f.members("/optimizer_weights"))  // the optimizer's own names (Optimizer::state)
    c.optimizer_state[name] = f.read_all<float>("/optimizer_weights/" + name);
  return c;
}

void restore_optimizer(const Checkpoint& ckpt, Optimizer& opt, const std::string& path) {
  if (ckpt.optimizer != opt.name())
    throw UsageError(path + ": checkpoint was trained with --optimizer " + ckpt.optimizer + "; resume with the same");
  for (auto& [name, buf] : opt.state()) {
    auto it = ckpt.optimizer_state.find(name);
    if (it == ckpt.optimizer_state.end() || it->second.size() != buf->size())
      throw Error(path + ": optimizer state " + name + " is missing or has the wrong size (corrupt checkpoint)");
    *buf = it->second;
  }
  opt.iterations = ckpt.iterations;
}

}  // namespace pitrain
