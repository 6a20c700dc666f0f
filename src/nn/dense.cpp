// Dense: y = x W + b with W (in, units), Keras' kernel layout; x (n, in), y (n, units).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "pitrain/error.h"
#include "pitrain/keras.h"
#include "pitrain/layer_registry.h"
#include "pitrain/matrix.h"
#include "pitrain/thread_pool.h"

namespace pitrain {
namespace {

class Dense : public Layer {
 public:
  Dense(const LayerCall& call, int units, Activation act) : Layer(call), units_(units), act_(act) {}
  Shape output_shape() const override { return {1, 1, units_, true}; }
  int64_t forward_flops() const override { return 2 * in_.size() * units_; }

  void keras_config(nlohmann::ordered_json& config) const override {
    config["units"] = units_;
    config["activation"] = keras_activation(act_);
    add_keras_kernel_config(config);
  }

  std::vector<ParamView> params() const override {
    return {{"kernel", {in_.size(), units_}, 0}, {"bias", {units_}, in_.size() * units_}};
  }

  void init_params(uint64_t key) override {
    glorot_uniform(w_, in_.size() * units_, in_.size(), units_, key);
    std::fill_n(w_ + in_.size() * units_, units_, 0.0f);
  }

  // A narrow layer (a classifier's last, of few units) runs its three products through
  // gemm_unpacked, y on its kernel padded to kNarrow columns with zeros, dW on dY padded likewise
  // (the padding's columns cut off after), dx on its kernel transposed; the padded and the
  // transposed kernel are made once a batch (prepared weights). Eigen's GEMM packs its operands
  // every call, a large part of a small share's time at 1600 x 15 (`cnn`). Only on a share of a
  // batch (no pool), whose thread's later shares reuse them: a whole batch on the pool (`mlp` at
  // batch 8) keeps Eigen's GEMM, where making them costs more than it saves (bench/compute.sh).
  int64_t prepared_floats() const override {
    return narrow() ? in_.size() * (kNarrow + units_) : 0;
  }

  void reserve(int batch) override {
    if (!narrow()) return;
    padded_rows_.resize(size_t(batch) * kNarrow);
    dw_padded_.resize(size_t(in_.size()) * kNarrow);
  }

  // With a pool, thread part p of P takes the kernel's rows [d p / P, d (p + 1) / P), a block
  // of inputs: its partial product forward, the same rows of dW (and columns of dx) backward,
  // and in the optimizer (run by ranges of the parameters, much the same ones) their update, so
  // that each block stays in one core's cache (mlp at batch 8 on 2 threads; bench/compute.sh).
  // Each part first copies its columns of x into a block of its own, which backward reads again:
  // x's columns in place are rows 784 floats apart, the second part's starting mid cache line,
  // and its dW is faster from the block, copy included. The partial products are summed in part
  // order: for a thread count, the same bits whichever thread ran what.
  void forward(const float* x, float* y, int n, const Context& ctx) override {
    const int d = int(in_.size());
    pool_ = ctx.pool;
    parts_ = pool_ ? pool_->parts(d * int64_t(units_)) : 1;
    if (unpacked() && !ctx.prepared) prepare();
    if (unpacked()) {
      // The padded y: (n, kNarrow).
      gemm_unpacked(n, kNarrow, d, x, d, 1, padded(), kNarrow, padded_rows_.data(), kNarrow);
      cut(padded_rows_.data(), n, y);
    } else if (parts_ == 1) {
      gemm(false, false, n, units_, d, x, w_, y);
    } else {
      const int64_t out = int64_t(n) * units_;
      partials_.resize(size_t(out * (parts_ - 1)));
      x_parts_.resize(size_t(n) * d);
      pool_->run(parts_, [&](int p) {
        const int lo = rows_from(p), hi = rows_from(p + 1);
        float* xp = x_part(p, n);
        for (int i = 0; i < n; ++i)
          std::copy(x + int64_t(i) * d + lo, x + int64_t(i) * d + hi, xp + int64_t(i) * (hi - lo));
        float* part = p ? &partials_[size_t(out * (p - 1))] : y;
        gemm(false, false, n, units_, hi - lo, xp, w_ + int64_t(lo) * units_, part);
      });
      for (int p = 1; p < parts_; ++p)
        for (int64_t i = 0; i < out; ++i) y[i] += partials_[size_t(out * (p - 1) + i)];
    }
    add_bias(y, n, units_, w_ + int64_t(d) * units_, act_);
  }

  void backward(const float* x, const float* y, float* dy, float* dx, int n) override {
    const int d = int(in_.size());
    bias_backward(y, dy, n, units_, dw_ + int64_t(d) * units_, act_);
    if (unpacked()) {
      pad(dy, n, padded_rows_.data());
      // The padded dW: x^T dY.
      gemm_unpacked(d, kNarrow, n, x, 1, d, padded_rows_.data(), kNarrow, dw_padded_.data(),
                    kNarrow);
      cut(dw_padded_.data(), d, dw_);
      if (dx) gemm_unpacked(n, d, units_, dy, units_, 1, transposed(), d, dx, d);  // dY W^T
      return;
    }
    auto rows = [&](int p) {
      const int lo = rows_from(p), hi = rows_from(p + 1);
      const float* x_rows = parts_ == 1 ? x : x_part(p, n);  // (n, hi - lo)
      gemm(true, false, hi - lo, units_, n, x_rows, dy, dw_ + int64_t(lo) * units_);  // dW = x^T dY
      // dx = dY W^T.
      if (dx)
        gemm(false, true, n, hi - lo, units_, dy, units_, w_ + int64_t(lo) * units_, units_,
             dx + lo, d);
    };
    if (parts_ == 1)
      rows(0);
    else
      pool_->run(parts_, rows);
  }

 private:
  std::string spec_args() const override { return std::to_string(units_) + activation_arg(act_); }

  static constexpr int kNarrow = 16;
  bool narrow() const { return units_ <= kNarrow; }
  bool unpacked() const { return narrow() && !pool_; }                    // the last forward's way
  float* padded() const { return prepared_; }                             // (in, kNarrow)
  float* transposed() const { return prepared_ + in_.size() * kNarrow; }  // (units, in)
  // (rows, units) -> (rows, kNarrow), zeros after each row, and back.
  void pad(const float* m, int64_t rows, float* out) const {
    for (int64_t i = 0; i < rows; ++i)
      std::fill(std::copy_n(m + i * units_, units_, out + i * kNarrow), out + (i + 1) * kNarrow,
                0.0f);
  }
  void cut(const float* m, int64_t rows, float* out) const {
    for (int64_t i = 0; i < rows; ++i) std::copy_n(m + i * kNarrow, units_, out + i * units_);
  }
  void prepare() {
    pad(w_, in_.size(), padded());
    MatrixView(transposed(), units_, in_.size()) =
        ConstMatrixView(w_, in_.size(), units_).transpose();
  }

  // The kernel's first row of a part.
  int rows_from(int part) const { return int(in_.size() * part / parts_); }
  // A part's columns of x: (n, its rows).
  float* x_part(int part, int n) { return x_parts_.data() + int64_t(n) * rows_from(part); }

  int units_;
  Activation act_;
  ThreadPool* pool_ = nullptr;  // the last forward's, and its split into parts_
  int parts_ = 1;
  std::vector<float> partials_;  // (parts_ - 1, n, units): the partial products of parts 1..
  std::vector<float> x_parts_;   // (n, in) as parts_ blocks: part p's columns of x, (n, its rows)
  // Narrow: (n, kNarrow), y before it is cut to units, then dY padded.
  std::vector<float> padded_rows_;
  std::vector<float> dw_padded_;  // narrow: (in, kNarrow), dW before it is cut to units
};

}  // namespace

std::unique_ptr<Layer> make_dense(const LayerCall& call) {
  expect_args(call, 1, 2);
  const int units = positive_int(call, call.args[0]);
  const Activation act = call.args.size() == 2 ? activation(call, call.args[1]) : Activation::none;
  if (call.in.h != 1 || call.in.w != 1)
    throw UsageError("model spec: dense needs a flat input; put flatten before it");
  return std::make_unique<Dense>(call, units, act);
}

}  // namespace pitrain
