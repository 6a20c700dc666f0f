// A Sequential model for images of one shape (H, W, C): its layers, one flat parameter buffer and
// one flat gradient buffer (one allreduce moves all gradients), and activations allocated per batch
// size.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pitrain/image_files.h"
#include "pitrain/layers.h"

namespace pitrain {

// Built-in models, by name; anything else is read as a layer list (see docs/data.md, "Model
// specs").
std::string expand_model_spec(const std::string& name_or_spec);

// Keras' names of a model's layers: conv2d, conv2d_1, dense, ... (checkpoint group names).
std::vector<std::string> keras_layer_names(const std::vector<std::unique_ptr<Layer>>& layers);

// Floats a sample needs in Model::reserve() and the layers' buffers, about: each layer's input and
// output, forward and backward (a fused pair's middle one too, though it is never stored: the
// shares' size, kShareBytes, is tuned in these units).
int64_t activation_floats(const std::vector<std::unique_ptr<Layer>>& layers);

// A UsageError "WHAT needs X GB a rank, ...; FIX" (check_fits_memory) unless a model of these
// layers fits in memory with `batch` rows run at once: 16 bytes a parameter (weights, gradients,
// Adam's two moments) and the batch's activations. From the layers' shapes: nothing is allocated.
void check_model_fits_memory(const std::vector<std::unique_ptr<Layer>>& layers, int64_t batch,
                             const std::string& what, const std::string& fix);

struct LossStats {
  double loss_sum = 0;  // summed over samples
  int64_t correct = 0;  // argmax == label
};

class Model {
 public:
  // For `input` images (the dataset's). Throws UsageError naming the bad token when the spec does
  // not parse or does not fit.
  Model(const std::string& name_or_spec, int classes, Shape input = kDrawingShape);
  Model(Model&&) = default;
  Model& operator=(Model&&) = default;
  // A model with `owner`'s layers that computes with the num_params() floats at `params` (owner's
  // parameters or a copy of them) and has scratch and prepared weights of its own, but no
  // parameters or gradients (params() and grads() are empty): one thread's scratch, whose
  // gradients go where bind_grads() points them (a share's buffer).
  static Model reading_params(const Model& owner, float* params);
  // Such a model reads the parameters at `params` from now on (and its gradients go nowhere
  // until bind_grads()).
  void read_params(float* params);

  const std::string& spec() const { return spec_; }  // canonical layer list
  int classes() const { return classes_; }
  const Shape& input_shape() const { return input_; }
  int64_t input_floats() const { return input_.size(); }  // a sample's
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  std::vector<std::string> layer_names() const { return keras_layer_names(layers_); }
  int64_t param_offset(size_t layer) const { return offsets_[layer]; }
  // Does layer + 1's work too (Layer::fuse_next).
  bool fused(size_t layer) const { return fused_[layer]; }
  int64_t num_params() const { return num_params_; }
  int64_t forward_flops() const;  // per sample
  int64_t activation_floats() const { return pitrain::activation_floats(layers_); }

  std::vector<float>& params() { return params_; }
  std::vector<float>& grads() { return grads_; }
  const std::vector<float>& params() const { return params_; }
  const std::vector<float>& grads() const { return grads_; }

  // Points the layers' gradients at `grads` (num_params() floats) instead of grads(): one
  // thread's scratch computing a share's gradients into that share's buffer (ThreadedModel).
  void bind_grads(float* grads);
  void init_params(uint64_t seed);  // Keras defaults: glorot_uniform kernels, zero biases
  void reserve(int batch);          // the only place activations are allocated

  // x: (n, H, W, C) floats in [0, 1] (input_shape()); returns the logits (n, classes).
  const float* forward(const float* x, int n, const Context& ctx);
  // Called during backward with lo each time grads()[lo, end) are final, lo decreasing to 0:
  // lets the gradient allreduce of the last layers start while the first ones still run.
  using GradientsReady = std::function<void(int64_t lo)>;
  // dlogits: (n, classes), overwritten. Fills grads() from the last forward. Stops at the first
  // layer with weights: the gradient of what lies below it would serve nothing (mlp's first
  // dense would compute one for flatten, a third of its GEMMs' work).
  void backward(const float* x, float* dlogits, int n, const GradientsReady& ready = nullptr);
  // Forward, mean softmax cross-entropy over the n samples (or over ctx.batch_rows, of which
  // these are a share), backward: grads() then holds the gradient of the mean loss. Returns the
  // summed loss and the correct count.
  LossStats forward_backward(const float* x, const int32_t* y, int n, const Context& ctx,
                             const GradientsReady& ready = nullptr);

 private:
  std::string spec_;
  int classes_;
  Shape input_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int64_t> offsets_;
  size_t first_weighted_ = 0;  // the first layer with parameters (the last layer has some)
  std::vector<bool> fused_;    // (layers) layer i does layer i + 1's work too (Layer::fuse_next)
  int64_t num_params_ = 0;
  std::vector<float> params_, grads_;
  std::vector<float> prepared_;  // every layer's prepared weights, one after the other
  std::vector<int64_t> prepared_offsets_;
  int batch_ = 0;
  std::vector<std::vector<float>> acts_;  // output of each layer, (batch, out); none where fused_
  std::vector<float> grad_a_, grad_b_;    // ping-pong buffers for activation gradients
  std::vector<float> dlogits_;            // (batch, classes)
};

// Softmax cross-entropy with integer labels, numerically stable (max subtracted).
// dlogits (optional) = (softmax - onehot) * grad_scale; use 1/n for the mean loss.
LossStats softmax_cross_entropy(const float* logits, const int32_t* labels, int n, int classes,
                                float* dlogits, float grad_scale);
// Logits to probabilities in place, row by row.
void softmax_rows(float* logits, int n, int classes);

}  // namespace pitrain
