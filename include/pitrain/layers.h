// Keras-like layers over float32 NHWC tensors. A layer knows its input shape from construction,
// holds views into the model's flat parameter and gradient buffers, and keeps its forward and
// backward side by side in one source file. Backward overwrites (never accumulates) gradients.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pitrain {

// Per-sample shape, channels-last: (H, W, C). A vector (after flatten or dense) is (1, 1, C)
// with flat set, which only changes how it is printed: (None, C) as Keras shows it.
struct Shape {
  int h = 1, w = 1, c = 1;
  bool flat = false;
  int64_t size() const { return int64_t(h) * w * c; }
  bool operator==(const Shape& o) const { return h == o.h && w == o.w && c == o.c; }
};

enum class Activation { none, relu, softmax };  // softmax: only on the last layer, folded into the loss

struct Context {
  bool training = false;
  uint64_t dropout_key = 0;  // per rank and step, so dropout masks differ between ranks and steps
};

// One weight tensor of a layer, in Keras' name and shape.
struct ParamView {
  std::string name;  // "kernel" or "bias"
  std::vector<int64_t> shape;
  int64_t offset = 0;  // into the model's flat buffers
  int64_t size() const;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string kind() const = 0;  // Keras class-like name: conv2d, dense, ...
  virtual std::string describe() const = 0;  // spec text that rebuilds this layer
  Shape input_shape() const { return in_; }
  virtual Shape output_shape() const = 0;
  virtual std::vector<ParamView> params() const { return {}; }  // offsets relative to the layer
  int64_t num_params() const;
  void bind(float* params, float* grads) { w_ = params, dw_ = grads; }
  virtual void init_params(uint64_t) {}
  // Sizes batch-dependent scratch (im2col, masks); never called in the per-batch path.
  virtual void reserve(int) {}
  // x: (n, in), y: (n, out).
  virtual void forward(const float* x, float* y, int n, const Context& ctx) = 0;
  // dy may be overwritten. dx is null for the first layer, which then skips that work.
  virtual void backward(const float* x, const float* y, float* dy, float* dx, int n) = 0;
  virtual int64_t forward_flops() const { return 0; }  // per sample, multiply-add = 2

 protected:
  explicit Layer(Shape in) : in_(in) {}
  Shape in_;
  float* w_ = nullptr;
  float* dw_ = nullptr;
};

class Conv2D : public Layer {
 public:
  // k x k kernel, stride 1; same = true pads as Keras 'same', else 'valid'.
  Conv2D(Shape in, int filters, int k, bool same, Activation act);
  std::string kind() const override { return "conv2d"; }
  std::string describe() const override;
  Shape output_shape() const override;
  std::vector<ParamView> params() const override;
  void init_params(uint64_t key) override;
  void reserve(int batch) override;
  void forward(const float* x, float* y, int n, const Context& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int n) override;
  int64_t forward_flops() const override;

 private:
  int filters_, k_, pad_top_, pad_left_;
  bool same_;
  Activation act_;
  std::vector<float> col_;  // (n*Ho*Wo, k*k*Cin): the im2col patches, kept for backward
};

class MaxPool2D : public Layer {
 public:
  explicit MaxPool2D(Shape in);  // 2x2, stride 2, 'valid' (odd edges dropped)
  std::string kind() const override { return "max_pooling2d"; }
  std::string describe() const override { return "maxpool2d"; }
  Shape output_shape() const override { return {in_.h / 2, in_.w / 2, in_.c}; }
  void reserve(int batch) override;
  void forward(const float* x, float* y, int n, const Context& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int n) override;

 private:
  std::vector<uint8_t> argmax_;  // (n, out): which of the window's 4 taps held the maximum
};

class Dense : public Layer {
 public:
  Dense(Shape in, int units, Activation act);
  std::string kind() const override { return "dense"; }
  std::string describe() const override;
  Shape output_shape() const override { return {1, 1, units_, true}; }
  std::vector<ParamView> params() const override;
  void init_params(uint64_t key) override;
  void forward(const float* x, float* y, int n, const Context& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int n) override;
  int64_t forward_flops() const override { return 2 * in_.size() * units_; }

 private:
  int units_;
  Activation act_;
};

class ReLU : public Layer {
 public:
  explicit ReLU(Shape in) : Layer(in) {}
  std::string kind() const override { return "re_lu"; }
  std::string describe() const override { return "relu"; }
  Shape output_shape() const override { return in_; }
  void forward(const float* x, float* y, int n, const Context& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int n) override;
};

class Flatten : public Layer {
 public:
  explicit Flatten(Shape in) : Layer(in) {}
  std::string kind() const override { return "flatten"; }
  std::string describe() const override { return "flatten"; }
  Shape output_shape() const override { return {1, 1, int(in_.size()), true}; }  // NHWC order, as Keras
  void forward(const float* x, float* y, int n, const Context& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int n) override;
};

class Dropout : public Layer {
 public:
  Dropout(Shape in, float rate, int index);  // index: position in the model, a mask stream each
  std::string kind() const override { return "dropout"; }
  std::string describe() const override;
  Shape output_shape() const override { return in_; }
  void reserve(int batch) override;
  void forward(const float* x, float* y, int n, const Context& ctx) override;
  void backward(const float* x, const float* y, float* dy, float* dx, int n) override;

 private:
  float rate_;
  int index_;
  std::vector<float> scale_;  // (n, in) rounded up to 4: 0 or 1/(1-rate), of the last training forward
  bool last_training_ = false;
};

// y = max(0, y) in place; dy *= (y > 0) in place. Shared by ReLU and the fused activations.
void relu_forward(float* y, int64_t count);
void relu_backward(const float* y, float* dy, int64_t count);
// Forward: y (rows, cols) += bias, then the activation, in one pass. Backward: dy through the
// activation (in place) and dbias = the column sums of that, in one pass.
void add_bias(float* y, int rows, int cols, const float* bias, Activation act);
void bias_backward(const float* y, float* dy, int rows, int cols, float* dbias, Activation act);

// Keras' glorot_uniform: U(-l, l), l = sqrt(6 / (fan_in + fan_out)).
void glorot_uniform(float* w, int64_t count, int64_t fan_in, int64_t fan_out, uint64_t key);

}  // namespace pitrain
