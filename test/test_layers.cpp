// Every layer: forward values on hand-computed cases and a finite-difference gradient check.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>

#include "pitrain/conv.h"
#include "pitrain/layer_registry.h"
#include "pitrain/matrix.h"
#include "pitrain/model.h"
#include "pitrain/rng.h"
#include "pitrain/thread_pool.h"

using namespace pitrain;

namespace {

// One layer from its spec text, through the registry; no layer here uses "classes".
std::unique_ptr<Layer> from_spec(const std::string& spec, Shape in, int index = 0) {
  return make_layer(spec, in, 10, index);
}

std::vector<float> random_values(size_t n, uint64_t key, float lo = -1, float hi = 1) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * uniform01(key, i);
  return v;
}

// Central difference of f at v[i], or nothing when the step crosses a kink (a ReLU at zero, a
// max-pool tie): there the two one-sided differences disagree and neither is the derivative.
std::optional<double> central_difference(const std::function<double()>& f, float& v, float h) {
  const float keep = v;
  const double mid = f();
  v = keep + h;
  const double up = f();
  v = keep - h;
  const double down = f();
  v = keep;
  if (std::abs((up - mid) - (mid - down)) / h > 1e-3 * std::max(1.0, std::abs(up - down) / (2 * h)))
    return {};
  return (up - down) / (2 * h);
}

// Compares analytic gradients with central differences (h = 1e-2 by default, loss summed in
// double). The float rounding of the outputs (~1e-7 relative) adds under 1e-4 to a difference, so
// 2e-3 absolute / relative is ample while an indexing or transposition bug is off by O(1). Kinks
// are skipped, and must be rare.
void compare(const std::function<double()>& loss, std::vector<float>& v,
             const std::vector<float>& analytic, const std::string& what, size_t samples = SIZE_MAX,
             float h = 1e-2f) {
  size_t kinks = 0, checked = 0;
  for (size_t k = 0; k < std::min(samples, v.size()); ++k, ++checked) {
    const size_t i = samples == SIZE_MAX ? k : size_t(splitmix64(k) % v.size());
    const auto numeric = central_difference(loss, v[i], h);
    if (!numeric) {
      ++kinks;
      continue;
    }
    INFO(what << "[" << i << "]");
    REQUIRE(std::abs(*numeric - analytic[i]) <= 2e-3 * std::max(1.0, std::abs(*numeric)));
  }
  CHECK(kinks * 10 <= checked);
}

// L = sum(y * r) for a fixed random r, so dL/dy = r.
void check_gradients(Layer& layer, int n, const Context& ctx = {}, float h = 1e-2f) {
  const int64_t in = n * layer.input_shape().size(), out = n * layer.output_shape().size();
  std::vector<float> w = random_values(size_t(layer.num_params()), 11), dw(w.size());
  std::vector<float> prepared(size_t(layer.prepared_floats()));  // made again by each forward
  layer.bind(w.data(), dw.data(), prepared.data());
  layer.reserve(n);
  std::vector<float> x = random_values(size_t(in), 12), y(static_cast<size_t>(out)),
                     dx(static_cast<size_t>(in));
  const std::vector<float> r = random_values(size_t(out), 13);
  auto loss = [&] {
    layer.forward(x.data(), y.data(), n, ctx);
    double l = 0;
    for (int64_t i = 0; i < out; ++i) l += double(y[size_t(i)]) * r[size_t(i)];
    return l;
  };
  loss();
  std::vector<float> dy = r;
  // backward overwrites dw and dx (the model never zeroes its gradients): no NaN may stay
  std::fill(dw.begin(), dw.end(), std::nanf(""));
  std::fill(dx.begin(), dx.end(), std::nanf(""));
  layer.backward(x.data(), y.data(), dy.data(), dx.data(), n);
  compare(loss, x, dx, layer.spec() + " dx", SIZE_MAX, h);
  compare(loss, w, dw, layer.spec() + " dw", SIZE_MAX, h);
}

// Puts back the GEMM a test found: the tests below try every one this CPU runs.
struct RestoreGemmBackend {
  std::string name;
  ~RestoreGemmBackend() { use_gemm_backend(name); }
};

}  // namespace

// Each GEMM of the build that this CPU runs (gemm_backends(): eigen-avx512, eigen-avx2 and
// openblas on x86-64 CPUs with AVX-512): every transpose, and sizes off the kernels' register
// blocks; with pad > 0, on blocks of wider matrices (row strides pad larger), whose columns
// beyond must stay as they were; without, gemm_add too, onto C as it was.
TEST_CASE(
    "gemm: every transpose against a plain loop, on each kernel this CPU runs, whole and on "
    "blocks") {
  const std::string fastest = gemm_backend();
  REQUIRE(gemm_backends().front() == fastest);
  REQUIRE_THROWS_AS(use_gemm_backend("no-such-gemm"), std::invalid_argument);
#if defined(PITRAIN_GEMM_ISA_KERNELS)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    const std::vector<std::string> names = gemm_backends();
    REQUIRE(std::find(names.begin(), names.end(), "eigen-avx2") != names.end());
  }
#endif
  const RestoreGemmBackend restore{fastest};
  // (1, n, k) and (m, 1, k): Eigen's matrix-vector products, as at batch 1.
  const auto [m, n, k] =
      GENERATE(std::tuple{1, 1, 1}, std::tuple{72, 64, 32}, std::tuple{17, 33, 5},
               std::tuple{5, 300, 129}, std::tuple{1, 300, 129}, std::tuple{129, 1, 300});
  for (const std::string& backend : gemm_backends()) {
    use_gemm_backend(backend);
    REQUIRE(gemm_backend() == backend);
    INFO("gemm backend: " << backend);
    for (int pad : {0, 3})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
          const std::vector<float> a = random_values(size_t(ta ? k : m) * lda, 1),
                                   b = random_values(size_t(tb ? n : k) * ldb, 2);
          // gemm overwrites C: no NaN may stay.
          std::vector<float> c(size_t(m) * ldc, std::nanf(""));
          for (int i = 0; i < m; ++i) std::fill_n(&c[size_t(i) * ldc + n], pad, 7.0f);
          std::vector<float> added(size_t(m) * n);  // C0 - 0.5 op(A) op(B)
          for (size_t i = 0; i < added.size(); ++i) added[i] = float(i % 7);
          if (pad) {
            gemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc);
          } else {
            gemm(ta, tb, m, n, k, a.data(), b.data(), c.data());
            gemm_add(ta, tb, m, n, k, -0.5f, a.data(), b.data(), added.data());
          }
          INFO("m " << m << " n " << n << " k " << k << " ta " << ta << " tb " << tb << " pad "
                    << pad);
          for (int i = 0; i < m; ++i) {
            for (int j = 0; j < n; ++j) {
              double want = 0;
              for (int p = 0; p < k; ++p)
                want += double(ta ? a[size_t(p) * lda + i] : a[size_t(i) * lda + p]) *
                        (tb ? b[size_t(j) * ldb + p] : b[size_t(p) * ldb + j]);
              INFO("at " << i << "," << j);
              REQUIRE(c[size_t(i) * ldc + j] == Approx(want).margin(1e-4 * k));
              if (!pad)
                REQUIRE(added[size_t(i) * n + j] ==
                        Approx(float((i * n + j) % 7) - 0.5 * want).margin(1e-4 * k));
            }
            for (int j = n; j < n + pad; ++j) REQUIRE(c[size_t(i) * ldc + j] == 7.0f);
          }
        }
  }
}

// gemm_unpacked on each kernel's vectors: sizes that leave partial row blocks, blocks of one
// vector and of fewer than a block holds, and columns past the last whole vector (of 4, 8 or 16
// floats); A read as stored and transposed; strides wider than the matrices, whose columns
// beyond stay as they were.
TEST_CASE(
    "gemm_unpacked: A as stored and transposed against a plain loop, on each kernel this CPU "
    "runs") {
  const RestoreGemmBackend restore{gemm_backend()};
  const auto [m, n, k] =
      GENERATE(std::tuple{1, 1, 1}, std::tuple{72, 64, 32}, std::tuple{32, 64, 72},
               std::tuple{18, 32, 64}, std::tuple{13, 100, 7}, std::tuple{25, 48, 3},
               std::tuple{7, 3, 9}, std::tuple{9, 20, 5}, std::tuple{30, 24, 11});
  for (const std::string& backend : gemm_backends()) {
    use_gemm_backend(backend);
    for (bool ta : {false, true}) {
      const int pad = 3, lda = (ta ? m : k) + pad, ldb = n + pad, ldc = n + pad;
      const std::vector<float> a = random_values(size_t(ta ? k : m) * lda, 1),
                               b = random_values(size_t(k) * ldb, 2);
      std::vector<float> c(size_t(m) * ldc, std::nanf(""));  // overwritten: no NaN may stay
      for (int i = 0; i < m; ++i) std::fill_n(&c[size_t(i) * ldc + n], pad, 7.0f);
      gemm_unpacked(m, n, k, a.data(), ta ? 1 : lda, ta ? lda : 1, b.data(), ldb, c.data(), ldc);
      INFO("gemm backend " << backend << " m " << m << " n " << n << " k " << k << " ta " << ta);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double want = 0;
          for (int p = 0; p < k; ++p)
            want += double(ta ? a[size_t(p) * lda + i] : a[size_t(i) * lda + p]) *
                    b[size_t(p) * ldb + j];
          INFO("at " << i << "," << j);
          REQUIRE(c[size_t(i) * ldc + j] == Approx(want).margin(1e-4 * k));
        }
        for (int j = n; j < n + pad; ++j) REQUIRE(c[size_t(i) * ldc + j] == 7.0f);
      }
    }
  }
}

TEST_CASE("conv2d gradients through im2col: valid and same padding, several channels") {
  REQUIRE(kDirectMaxDepth < 9 * 4);  // each below is deeper, and not a 3x3 over 8 channels or more
  check_gradients(*from_spec("conv2d(3,3)", {7, 6, 4}), 2);
  check_gradients(*from_spec("conv2d(2,3,same)", {5, 7, 5}), 2);
  // Asymmetric padding, as Keras pads.
  check_gradients(*from_spec("conv2d(2,4,same,relu)", {6, 5, 3}), 1);
}

TEST_CASE(
    "conv2d gradients through Winograd: 3x3 over enough channels, odd and even sizes, both tiles") {
  REQUIRE(kWinogradMinChannels <= 8);
  // 9 tiles of 4x4 positions against 4 of 6x6: a tie, the smaller.
  REQUIRE(winograd_tile({6, 6, 4}) == 2);
  check_gradients(*from_spec("conv2d(4,3,relu)", {8, 8, 8}), 2);
  // F(4x4) rounds ~10x more, enough to look like a kink at h = 1e-2. Without an activation the
  // layer is linear in x and in w, so central differences are exact at any h: a large one lifts
  // them above the rounding.
  REQUIRE(winograd_tile({5, 8, 3}) == 4);
  check_gradients(*from_spec("conv2d(3,3,same)", {5, 8, 9}), 2, {}, 0.5f);
}

namespace {

struct ConvRun {
  std::vector<float> y, dy, dkernel, dbias, dx;
};

// One forward and backward of conv on fixed random x, kernel, bias and dy; dx only if with_dx
// (a first layer's backward makes none).
ConvRun run_conv(ConvAlgorithm& conv, Shape in, Shape out, int k, int n, bool with_dx = true) {
  conv.reserve(n);
  const auto x = random_values(size_t(n * in.size()), 31),
             kernel = random_values(size_t(k * k * in.c * out.c), 32);
  const auto bias = random_values(size_t(out.c), 34);
  std::vector<float> u(size_t(conv.prepared_floats()));
  conv.prepare(kernel.data(), u.data());
  // Gradients are overwritten, not added to: no NaN may stay.
  ConvRun r{std::vector<float>(size_t(n * out.size())), random_values(size_t(n * out.size()), 33),
            std::vector<float>(kernel.size(), std::nanf("")),
            std::vector<float>(size_t(out.c), std::nanf("")),
            std::vector<float>(with_dx ? x.size() : 0, std::nanf(""))};
  conv.forward(x.data(), kernel.data(), bias.data(), u.data(), r.y.data(), n);
  conv.backward(x.data(), r.y.data(), r.dy.data(), kernel.data(), u.data(), r.dkernel.data(),
                r.dbias.data(), with_dx ? r.dx.data() : nullptr, n);
  return r;
}

void require_same(const ConvRun& a, const ConvRun& b, double margin) {
  for (auto [u, v] :
       {std::pair{&a.y, &b.y}, std::pair{&a.dy, &b.dy}, std::pair{&a.dkernel, &b.dkernel},
        std::pair{&a.dbias, &b.dbias}, std::pair{&a.dx, &b.dx}}) {
    REQUIRE(u->size() == v->size());
    for (size_t i = 0; i < u->size(); ++i) REQUIRE((*u)[i] == Approx((*v)[i]).margin(margin));
  }
}

}  // namespace

TEST_CASE("Winograd and im2col compute the same convolution and gradients") {
  // Odd and even sides: tiles that leave the image on one edge (m = 4 on 9x8: by three pixels).
  // Channel counts of 8 or more go in blocks of eight, 5 one channel at a time. F(4x4)'s larger
  // transform coefficients (up to 8) round more: sums over 288 products here agree to ~3e-5.
  for (auto [same, cin, filters, tile, act] :
       {std::tuple{false, 8, 5, 2, Activation::relu}, std::tuple{true, 8, 5, 2, Activation::none},
        std::tuple{false, 32, 16, 2, Activation::relu},
        std::tuple{false, 8, 5, 4, Activation::none}, std::tuple{true, 8, 5, 4, Activation::relu},
        std::tuple{false, 32, 16, 4, Activation::relu}}) {
    const Shape in{9, 8, cin};
    const int pad = same ? 1 : 0, n = 3;
    const Shape out = same ? Shape{9, 8, filters} : Shape{7, 6, filters};
    auto winograd = make_winograd_conv(in, out, pad, pad, tile, act);
    auto im2col = make_im2col_conv(in, out, 3, pad, pad, act);
    REQUIRE(im2col->prepared_floats() == 0);
    require_same(run_conv(*winograd, in, out, 3, n), run_conv(*im2col, in, out, 3, n),
                 tile == 2 ? 2e-5 : 1e-4);
  }
}

TEST_CASE("direct and im2col compute the same convolution and gradients") {
  // 1 to 3 channels, as the direct one runs; 41 filters take a block of 32, one of 8 and one
  // alone; 'same' padding puts pixels on every edge; kernels of 3, 5 and 2 (asymmetric padding).
  for (auto [k, same, cin, filters, act] :
       {std::tuple{3, false, 1, 32, Activation::relu}, std::tuple{3, true, 1, 41, Activation::relu},
        std::tuple{3, true, 3, 5, Activation::none}, std::tuple{5, true, 1, 8, Activation::relu},
        std::tuple{2, true, 2, 41, Activation::none},
        std::tuple{3, false, 2, 9, Activation::relu}}) {
    const Shape in{9, 8, cin};
    const int top = same ? (k - 1) / 2 : 0, n = 3;
    const Shape out = same ? Shape{9, 8, filters} : Shape{9 - k + 1, 8 - k + 1, filters};
    INFO("k " << k << " same " << same << " cin " << cin << " filters " << filters);
    auto direct = make_direct_conv(in, out, k, top, top, act);
    auto im2col = make_im2col_conv(in, out, k, top, top, act);
    for (bool with_dx : {true, false})
      require_same(run_conv(*direct, in, out, k, n, with_dx),
                   run_conv(*im2col, in, out, k, n, with_dx), 2e-5);
  }
}

TEST_CASE("the direct convolution pooling its own output: the bits of conv2d then maxpool2d") {
  // Odd output heights and widths (the pool drops the last row or column), 'same' padding, every
  // kind of filter block (41), with and without an activation, with and without dx.
  for (auto [k, same, cin, filters, act] :
       {std::tuple{3, false, 1, 32, Activation::relu}, std::tuple{3, true, 1, 41, Activation::relu},
        std::tuple{2, false, 2, 9, Activation::none}, std::tuple{2, false, 1, 8, Activation::relu},
        std::tuple{3, true, 3, 5, Activation::relu}}) {
    const Shape in{9, 8, cin};
    const int top = same ? (k - 1) / 2 : 0, n = 3;
    const Shape out = same ? Shape{9, 8, filters} : Shape{9 - k + 1, 8 - k + 1, filters};
    INFO("k " << k << " same " << same << " cin " << cin << " filters " << filters);
    auto pool = from_spec("maxpool2d", out);
    const Shape pooled = pool->output_shape();
    auto fused = make_direct_conv(in, out, k, top, top, act);
    REQUIRE(fused->fuse_pool());
    for (bool with_dx : {true, false}) {
      // Apart: the convolution, then the pool, then back through both.
      auto apart = make_direct_conv(in, out, k, top, top, act);
      const auto x = random_values(size_t(n * in.size()), 31),
                 kernel = random_values(size_t(k * k * cin * filters), 32);
      const auto bias = random_values(size_t(filters), 34),
                 dpooled = random_values(size_t(n * pooled.size()), 35);
      apart->reserve(n);
      std::vector<float> y(size_t(n * out.size())), yp(size_t(n * pooled.size())), dy(y.size()),
          dp = dpooled;
      std::vector<float> dkernel(kernel.size()), dbias(bias.size()), dx(with_dx ? x.size() : 0);
      apart->forward(x.data(), kernel.data(), bias.data(), nullptr, y.data(), n);
      pool->reserve(n);
      pool->forward(y.data(), yp.data(), n, {});
      pool->backward(y.data(), yp.data(), dp.data(), dy.data(), n);
      apart->backward(x.data(), y.data(), dy.data(), kernel.data(), nullptr, dkernel.data(),
                      dbias.data(), with_dx ? dx.data() : nullptr, n);
      // Fused: gradients overwritten, not added to, so no NaN may stay.
      fused->reserve(n);
      std::vector<float> fy(yp.size(), std::nanf("")), fdp = dpooled,
                                                       fdk(dkernel.size(), std::nanf(""));
      std::vector<float> fdb(dbias.size(), std::nanf(""));
      std::vector<float> fdx(dx.size(), std::nanf(""));
      fused->forward(x.data(), kernel.data(), bias.data(), nullptr, fy.data(), n);
      fused->backward(x.data(), fy.data(), fdp.data(), kernel.data(), nullptr, fdk.data(),
                      fdb.data(), with_dx ? fdx.data() : nullptr, n);
      CHECK(fy == yp);
      CHECK(fdk == dkernel);
      CHECK(fdb == dbias);
      CHECK(fdx == dx);
    }
  }
}

TEST_CASE("a model fuses conv2d with the maxpool2d after it, to the bit") {
  // A relu layer between them (the identity after conv2d's own relu) keeps them apart. In the
  // second pair of models the fused convolution is not the first layer, so it makes dx too.
  const int n = 3, classes = 4;
  for (auto [fused_spec, apart_spec, conv] :
       {std::tuple{"conv2d(8,3,relu) maxpool2d flatten dense(classes)",
                   "conv2d(8,3,relu) relu maxpool2d flatten dense(classes)", 0},
        std::tuple{"conv2d(3,3,relu) conv2d(8,3,relu) maxpool2d flatten dense(classes)",
                   "conv2d(3,3,relu) conv2d(8,3,relu) relu maxpool2d flatten dense(classes)", 1}}) {
    INFO(fused_spec);
    Model fused(fused_spec, classes), apart(apart_spec, classes);
    REQUIRE(fused.fused(size_t(conv)));
    for (size_t i = 0; i < apart.layers().size(); ++i) REQUIRE(!apart.fused(i));
    fused.init_params(7);
    apart.params() = fused.params();
    const auto x = random_values(size_t(n) * 784, 41, 0, 1);
    const std::vector<int32_t> labels = {0, 3, 1};
    for (Model* m : {&fused, &apart}) m->forward_backward(x.data(), labels.data(), n, {});
    CHECK(fused.grads() == apart.grads());
    const auto logits = [&](Model& m) {
      const float* l = m.forward(x.data(), n, {});
      return std::vector<float>(l, l + n * classes);
    };
    CHECK(logits(fused) == logits(apart));
  }
}

TEST_CASE(
    "conv2d gradients through the direct convolution: shallow inputs, valid and same padding") {
  REQUIRE(kDirectMaxDepth >= 9 * 3);
  check_gradients(*from_spec("conv2d(2,3,relu)", {5, 6, 1}), 2);
  check_gradients(*from_spec("conv2d(3,5,same,relu)", {6, 5, 1}), 1);
  // Every kind of filter block (41: one of 32, one of 8, one alone). Without an activation the
  // layer is linear, so a large h lifts the differences above the rounding of 41 filters' sums.
  check_gradients(*from_spec("conv2d(41,3,same)", {5, 6, 3}), 2, {}, 0.5f);
}

TEST_CASE("conv2d forward against a hand-computed case") {
  // 3x3 single-channel image, 2x2 kernel, 'valid': out = sum of the window weighted by the kernel.
  auto conv = from_spec("conv2d(1,2)", {3, 3, 1});
  std::vector<float> w = {1, 2, 3, 4, 0.5f}, dw(5);  // kernel (2,2,1,1) row-major, then bias
  conv->bind(w.data(), dw.data());
  conv->reserve(1);
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, y(4);
  conv->forward(x.data(), y.data(), 1, {});
  CHECK(y == std::vector<float>{1 + 4 + 12 + 20 + 0.5f, 2 + 6 + 15 + 24 + 0.5f,
                                4 + 10 + 21 + 32 + 0.5f, 5 + 12 + 24 + 36 + 0.5f});
  // A kernel of ones and no bias: each output is the sum of its window over x.
  auto window_sums = [&](const std::string& spec, int k) {
    auto layer = from_spec(spec, {3, 3, 1});
    std::vector<float> ones(size_t(k * k + 1), 1.0f), d(ones.size()), out(9);
    ones.back() = 0;
    layer->bind(ones.data(), d.data());
    layer->reserve(1);
    layer->forward(x.data(), out.data(), 1, {});
    return out;
  };
  const auto ys = window_sums("conv2d(1,3,same)", 3);
  CHECK(ys[0] == 1 + 2 + 4 + 5);  // the corner sees a 2x2 window inside the zero padding
  CHECK(ys[4] == 45);
  // An even kernel with 'same' pads as Keras (TensorFlow) does: the extra row and column go
  // below and to the right, so each output sums the window starting at its own pixel.
  const auto ye = window_sums("conv2d(1,2,same)", 2);
  CHECK(ye == std::vector<float>{12, 16, 9, 24, 28, 15, 15, 17, 9});
}

TEST_CASE("maxpool2d: floor on odd sizes, gradient to the maximum only") {
  auto pool = from_spec("maxpool2d", {5, 3, 2});
  CHECK(pool->output_shape() == Shape{2, 1, 2});
  check_gradients(*pool, 2);
  auto small = from_spec("maxpool2d", {2, 2, 1});
  small->reserve(1);
  std::vector<float> x = {1, 7, 3, 2}, y(1), dy = {5}, dx(4);
  small->forward(x.data(), y.data(), 1, {});
  CHECK(y[0] == 7);
  small->backward(x.data(), y.data(), dy.data(), dx.data(), 1);
  CHECK(dx == std::vector<float>{0, 5, 0, 0});
}

TEST_CASE("dense gradients and forward") {
  check_gradients(*from_spec("dense(4,relu)", {1, 1, 5}), 3);
  auto d2 = from_spec("dense(2)", {1, 1, 2});
  std::vector<float> w = {1, 2, 3, 4, 10, 20}, dw(6);  // kernel (in=2, out=2), bias
  std::vector<float> prepared(size_t(d2->prepared_floats()));
  d2->bind(w.data(), dw.data(), prepared.data());
  d2->reserve(1);
  std::vector<float> x = {1, 1}, y(2);
  d2->forward(x.data(), y.data(), 1, {});
  CHECK(y == std::vector<float>{1 + 3 + 10, 2 + 4 + 20});
}

// With a pool, Dense splits its kernel's rows across the threads (forward's partial products
// summed in part order): the same gradients, and outputs equal to rounding to one thread's.
TEST_CASE("dense gradients with its kernel split across threads") {
  ThreadPool pool(3);
  Context split;
  split.pool = &pool;
  check_gradients(*from_spec("dense(7,relu)", {1, 1, 3 * int(ThreadPool::kRangeGrain) / 7 + 5}), 2,
                  split);
  const Shape in{1, 1, 300};
  // 27,000 weights: 3 parts.
  auto whole = from_spec("dense(90)", in), parts = from_spec("dense(90)", in);
  std::vector<float> w = random_values(size_t(whole->num_params()), 3), dw1(w.size()),
                     dw3(w.size());
  whole->bind(w.data(), dw1.data()), parts->bind(w.data(), dw3.data());
  const int n = 4;
  const std::vector<float> x = random_values(size_t(n) * 300, 4);
  std::vector<float> y1(n * 90), y3(n * 90), dy1 = random_values(n * 90, 5), dy3 = dy1,
                                             dx1(n * 300), dx3(n * 300);
  whole->forward(x.data(), y1.data(), n, {});
  parts->forward(x.data(), y3.data(), n, split);
  whole->backward(x.data(), y1.data(), dy1.data(), dx1.data(), n);
  parts->backward(x.data(), y3.data(), dy3.data(), dx3.data(), n);
  for (size_t i = 0; i < y1.size(); ++i) REQUIRE(y3[i] == Approx(y1[i]).margin(1e-5));
  CHECK(y3 != y1);  // split: the partial products add in another order
  for (size_t i = 0; i < dw1.size(); ++i) REQUIRE(dw3[i] == Approx(dw1[i]).margin(1e-5));
  for (size_t i = 0; i < dx1.size(); ++i) REQUIRE(dx3[i] == Approx(dx1[i]).margin(1e-5));
}

TEST_CASE("relu, flatten and dropout gradients") {
  check_gradients(*from_spec("relu", {3, 3, 2}), 2);
  check_gradients(*from_spec("flatten", {3, 2, 2}), 2);
  check_gradients(*from_spec("dropout(0.3)", {1, 1, 50}, 1), 2, Context{true, 99});
}

TEST_CASE("flatten keeps Keras' channels-last order") {
  auto flat = from_spec("flatten", {2, 2, 3});
  std::vector<float> x(12), y(12);
  for (int i = 0; i < 12; ++i) x[size_t(i)] = float(i);  // x[h][w][c] = (h*2 + w)*3 + c
  flat->forward(x.data(), y.data(), 1, {});
  CHECK(y[1] == 1);  // (h=0, w=0, c=1): channels vary fastest, as in Keras' Flatten on NHWC
  CHECK(y[3] == 3);  // (h=0, w=1, c=0)
}

TEST_CASE("dropout: inverted scaling in training, identity in inference, mask per key") {
  auto drop = from_spec("dropout(0.5)", {1, 1, 10000});
  drop->reserve(1);
  std::vector<float> x(10000, 1.0f), y(10000), y2(10000);
  drop->forward(x.data(), y.data(), 1, Context{true, 1});
  int zeros = 0;
  for (float v : y) {
    CHECK((v == 0.0f || v == 2.0f));
    zeros += v == 0.0f;
  }
  CHECK(zeros > 4700);
  CHECK(zeros < 5300);
  drop->forward(x.data(), y2.data(), 1, Context{true, 2});
  CHECK(y2 != y);
  drop->forward(x.data(), y2.data(), 1, Context{false, 1});
  CHECK(y2 == x);
}

TEST_CASE(
    "dropout: a share of the batch draws the same mask as the whole batch, at widths off its draws "
    "of four") {
  // 7 units a row: a share starting at row 1 starts inside a draw of four, and rows end in a tail.
  auto whole = from_spec("dropout(0.5)", {1, 1, 7}), share = from_spec("dropout(0.5)", {1, 1, 7});
  whole->reserve(4), share->reserve(3);
  std::vector<float> x(28, 1.0f), y(28), y_share(21);
  whole->forward(x.data(), y.data(), 4, Context{true, 5});
  Context rows_1_to_3{true, 5};
  rows_1_to_3.first_row = 1, rows_1_to_3.batch_rows = 4;
  share->forward(x.data() + 7, y_share.data(), 3, rows_1_to_3);
  CHECK(std::equal(y_share.begin(), y_share.end(), y.begin() + 7));
  CHECK(std::count(y.begin(), y.end(), 0.0f) > 0);  // a mask, not all kept
  CHECK(std::count(y.begin(), y.end(), 2.0f) > 0);
}

TEST_CASE("softmax cross-entropy: values, stability and gradient") {
  std::vector<float> logits = {1000, 0, -1000, 0, 0, 0};  // huge logits must not overflow
  std::vector<int32_t> labels = {0, 2};
  std::vector<float> d(6);
  const LossStats st = softmax_cross_entropy(logits.data(), labels.data(), 2, 3, d.data(), 0.5f);
  CHECK(st.loss_sum == Approx(std::log(3.0)).epsilon(1e-6));
  CHECK(st.correct == 1);  // argmax of a tie is the first class, not label 2
  CHECK(d[0] == Approx(0.0f).margin(1e-6));
  CHECK(d[5] == Approx((1.0f / 3 - 1) * 0.5f));
  std::vector<float> p = {1, 2, 3};
  softmax_rows(p.data(), 1, 3);
  CHECK(p[0] + p[1] + p[2] == Approx(1.0f));
}

TEST_CASE("whole model: gradient of the mean loss matches finite differences") {
  Model model(
      "conv2d(4,3,same,relu) maxpool2d conv2d(5,3,relu) maxpool2d flatten dropout(0.3) "
      "dense(8,relu) relu dense(classes)",
      3);
  model.init_params(5);
  const int n = 2;
  model.reserve(n);
  std::vector<float> x = random_values(size_t(n) * 784, 21, 0, 1);
  std::vector<int32_t> y = {0, 2};
  const Context ctx{true, 77};
  model.forward_backward(x.data(), y.data(), n, ctx);
  const std::vector<float> analytic = model.grads();
  auto loss = [&] {
    const float* logits = model.forward(x.data(), n, ctx);
    return softmax_cross_entropy(logits, y.data(), n, 3, nullptr, 0).loss_sum / n;
  };
  // A bias feeds hundreds of ReLUs and pool windows here, so a smaller step keeps kinks rare.
  compare(loss, model.params(), analytic, "parameter", 200, 1e-3f);
}
