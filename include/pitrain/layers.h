// Keras-like layers over float32 NHWC tensors. A layer knows its input shape from construction,
// holds views into the model's flat parameter and gradient buffers, and keeps its forward and
// backward side by side in one source file. Backward overwrites (never accumulates) gradients.
// The layer classes live in their .cpp files: layer_registry.h builds them from spec text.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "pitrain/shape.h"

namespace pitrain {

// softmax: only on the last layer, folded into the loss.
enum class Activation { none, relu, softmax };

class ThreadPool;

struct Context {
  bool training = false;
  uint64_t dropout_key = 0;  // per rank and step, so dropout masks differ between ranks and steps
  // The rows of this call are [first_row, first_row + n) of a batch of batch_rows (0: n), as
  // when each thread computes a share: dropout draws by row in the batch, the loss is its mean.
  int first_row = 0, batch_rows = 0;
  // The layers' prepared weights are already made from the current parameters: a thread's
  // later shares of a batch read what its first share made (ThreadedModel).
  bool prepared = false;
  // The rank's threads, where they do not split the batch (ThreadedModel: too few rows): a layer
  // with many weights may split those among them instead, in forward and in the backward after it.
  ThreadPool* pool = nullptr;
};

// One weight tensor of a layer, in Keras' name and shape.
struct ParamView {
  std::string name;  // "kernel" or "bias"
  std::vector<int64_t> shape;
  int64_t offset = 0;  // into the layer's part of the model's flat buffers
  int64_t size() const;
};

struct LayerType;  // a layer type's row in the registry (layer_registry.h)
struct LayerCall;  // what a registry factory builds a layer from

class Layer {
 public:
  virtual ~Layer() = default;
  const LayerType& type() const { return *type_; }  // spec token, Keras class and name
  std::string spec() const;  // spec text that rebuilds this layer: token or token(args)
  Shape input_shape() const { return in_; }
  virtual Shape output_shape() const = 0;
  virtual std::vector<ParamView> params() const { return {}; }  // offsets relative to the layer
  int64_t num_params() const;
  // Weights a layer derives from its parameters for forward and backward (Winograd's
  // transformed kernel, a narrow Dense's padded and transposed one): prepared_floats() of them,
  // made by forward into the `prepared` buffer of bind() unless its Context says they are made
  // already.
  virtual int64_t prepared_floats() const { return 0; }
  void bind(float* params, float* grads, float* prepared = nullptr) {
    w_ = params, dw_ = grads, prepared_ = prepared;
  }
  void bind_grads(float* grads) { dw_ = grads; }
  virtual void init_params(uint64_t) {}
  // Sizes batch-dependent scratch (im2col, masks); never called in the per-batch path.
  virtual void reserve(int) {}
  // x: (n, in), y: (n, out).
  virtual void forward(const float* x, float* y, int n, const Context& ctx) = 0;
  // dy may be overwritten. dx is null for the first layer with weights (Model::backward), which
  // then skips that work.
  virtual void backward(const float* x, const float* y, float* dy, float* dx, int n) = 0;
  virtual int64_t forward_flops() const { return 0; }  // per sample, multiply-add = 2
  // Takes over `next`'s work too if it can (Model calls it once, before reserve), and returns
  // whether it did: then Model calls its forward with next's output buffer, its backward with
  // next's output and gradient, and never next's. The layers stay two in the model's summary,
  // names and Keras export.
  virtual bool fuse_next(const Layer& /*next*/) { return false; }
  // Adds the entries of its Keras config that are its own (filters, kernel_size, activation,
  // ...) to `config`, which holds name, trainable and dtype: what Keras and TensorFlow.js
  // rebuild the layer from (keras.h).
  virtual void keras_config(nlohmann::ordered_json& config) const = 0;

 protected:
  explicit Layer(const LayerCall& call);
  Shape in_;
  float* w_ = nullptr;
  float* dw_ = nullptr;
  float* prepared_ = nullptr;

 private:
  virtual std::string spec_args() const { return {}; }  // "32,3,relu"; empty: no arguments
  const LayerType* type_;  // set by the factory's call, a row that outlives every layer
};

// The bias and fused activation of Dense and Conv2D. Forward: y (rows, cols) += bias, then the
// activation, in one pass. Backward: dy through the activation (in place) and dbias = the column
// sums of that, in one pass.
void add_bias(float* y, int rows, int cols, const float* bias, Activation act);
void bias_backward(const float* y, float* dy, int rows, int cols, float* dbias, Activation act);

// Keras' glorot_uniform: U(-l, l), l = sqrt(6 / (fan_in + fan_out)).
void glorot_uniform(float* w, int64_t count, int64_t fan_in, int64_t fan_out, uint64_t key);

}  // namespace pitrain
