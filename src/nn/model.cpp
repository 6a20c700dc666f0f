#include "pitrain/model.h"

#include <algorithm>
#include <map>

#include "pitrain/error.h"
#include "pitrain/layer_registry.h"
#include "pitrain/memory.h"
#include "pitrain/rng.h"

namespace pitrain {

Model::Model(const std::string& name_or_spec, int classes, Shape input)
    : classes_(classes), input_(input) {
  if (classes < 2)
    throw UsageError("model: need at least 2 classes, got " + std::to_string(classes));
  layers_ = make_layers(name_or_spec, input, classes);
  for (auto& l : layers_) spec_ += (spec_.empty() ? "" : " ") + l->spec();
  for (size_t i = 0; i < layers_.size(); ++i)
    fused_.push_back(i + 1 < layers_.size() && layers_[i]->fuse_next(*layers_[i + 1]));
  const Shape out = layers_.back()->output_shape();
  if (!(out == Shape{1, 1, classes}))
    throw UsageError("model spec: the last layer gives " + std::to_string(out.size()) +
                     " outputs per image, expected " + std::to_string(classes) +
                     " (one per class; end with dense(classes,softmax))");
  int64_t total = 0;
  for (auto& l : layers_) offsets_.push_back(total), total += l->num_params();
  if (total == 0)
    throw UsageError("model spec: no layer has weights; add a dense or conv2d layer to learn with");
  while (layers_[first_weighted_]->num_params() == 0) ++first_weighted_;
  if (total > (int64_t(1) << 30))
    throw UsageError("model spec: " + std::to_string(total) +
                     " parameters is more than this tool is meant for (2^30)");
  check_model_fits_memory(layers_, 0,
                          "model " + spec_ + ": its " + std::to_string(total) +
                              " parameters (weights, gradients, Adam's two moments)",
                          "use fewer or smaller layers");
  num_params_ = total;
  params_.assign(size_t(total), 0.0f);
  grads_.assign(size_t(total), 0.0f);
  int64_t prepared = 0;
  for (auto& l : layers_) prepared_offsets_.push_back(prepared), prepared += l->prepared_floats();
  prepared_.assign(size_t(prepared), 0.0f);
  for (size_t i = 0; i < layers_.size(); ++i)
    layers_[i]->bind(params_.data() + offsets_[i], grads_.data() + offsets_[i],
                     prepared_.data() + prepared_offsets_[i]);
}

Model Model::reading_params(const Model& owner, float* params) {
  Model m(owner.spec_, owner.classes_, owner.input_);
  m.params_ = {}, m.grads_ = {};
  m.read_params(params);
  return m;
}

void Model::read_params(float* params) {
  for (size_t i = 0; i < layers_.size(); ++i)
    layers_[i]->bind(params + offsets_[i], nullptr, prepared_.data() + prepared_offsets_[i]);
}

void Model::bind_grads(float* grads) {
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->bind_grads(grads + offsets_[i]);
}

// Keras numbers the layers of each kind: conv2d, conv2d_1, ...
std::vector<std::string> keras_layer_names(const std::vector<std::unique_ptr<Layer>>& layers) {
  std::map<std::string, int> seen;
  std::vector<std::string> names;
  for (auto& l : layers) {
    const std::string name = l->type().keras_name;
    const int k = seen[name]++;
    names.push_back(k ? name + "_" + std::to_string(k) : name);
  }
  return names;
}

int64_t activation_floats(const std::vector<std::unique_ptr<Layer>>& layers) {
  int64_t n = 0;
  for (const auto& l : layers) n += 2 * (l->input_shape().size() + l->output_shape().size());
  return n;
}

void check_model_fits_memory(const std::vector<std::unique_ptr<Layer>>& layers, int64_t batch,
                             const std::string& what, const std::string& fix) {
  double params = 0;
  for (const auto& l : layers) params += double(l->num_params());
  check_fits_memory(
      what, 16.0 * params + double(batch) * double(activation_floats(layers)) * sizeof(float), fix);
}

int64_t Model::forward_flops() const {
  int64_t f = 0;
  for (auto& l : layers_) f += l->forward_flops();
  return f;
}

void Model::init_params(uint64_t seed) {
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->init_params(rng_key(seed, 0x1417, i));
}

void Model::reserve(int batch) {
  if (batch == batch_) return;
  batch_ = batch;
  acts_.resize(layers_.size());
  size_t widest = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    // Products in int64 (Shape::size), then size_t: the batch bound (fit's memory check) keeps them
    // in range. A fused pair's middle tensor is never stored, nor its gradient, and its second
    // layer never runs.
    const bool second = i > 0 && fused_[i - 1];
    const size_t out = fused_[i] ? 0 : size_t(batch * layers_[i]->output_shape().size());
    const size_t in = second ? 0 : size_t(batch * layers_[i]->input_shape().size());
    acts_[i].assign(out, 0.0f);
    widest = std::max({widest, out, in});
    if (!second) layers_[i]->reserve(batch);
  }
  dlogits_.assign(size_t(batch) * classes_, 0.0f);
  grad_a_.assign(widest, 0.0f);
  grad_b_.assign(widest, 0.0f);
}

const float* Model::forward(const float* x, int n, const Context& ctx) {
  if (n > batch_) reserve(n);
  const float* in = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const size_t out = fused_[i] ? i + 1 : i;  // a fused pair writes its second layer's output
    layers_[i]->forward(in, acts_[out].data(), n, ctx);
    in = acts_[out].data();
    i = out;
  }
  return in;
}

void Model::backward(const float* x, float* dlogits, int n, const GradientsReady& ready) {
  float* dy = dlogits;
  for (size_t i = layers_.size(); i-- > first_weighted_;) {
    const size_t out = i;
    if (i > 0 && fused_[i - 1]) --i;  // a fused pair: its first layer does both
    float* dx =
        i == first_weighted_ ? nullptr : (dy == grad_a_.data() ? grad_b_.data() : grad_a_.data());
    layers_[i]->backward(i == 0 ? x : acts_[i - 1].data(), acts_[out].data(), dy, dx, n);
    if (ready && layers_[i]->num_params() > 0) ready(offsets_[i]);
    dy = dx;
  }
}

LossStats Model::forward_backward(const float* x, const int32_t* y, int n, const Context& ctx,
                                  const GradientsReady& ready) {
  const float* logits = forward(x, n, ctx);
  const int mean_over = ctx.batch_rows ? ctx.batch_rows : n;
  const LossStats st =
      softmax_cross_entropy(logits, y, n, classes_, dlogits_.data(), 1.0f / float(mean_over));
  backward(x, dlogits_.data(), n, ready);
  return st;
}

}  // namespace pitrain
