// Model specs and parameter counts, optimizers, a small training run, checkpoints.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "helpers.h"
#include "pitrain/checkpoint.h"
#include "pitrain/error.h"
#include "pitrain/h5.h"
#include "pitrain/model.h"
#include "pitrain/optimizer.h"
#include "pitrain/thread_pool.h"
#include "pitrain/fit.h"
#include "pitrain/guard.h"

using namespace pitrain;

TEST_CASE("built-in models have Keras' parameter counts") {
  CHECK(Model("cnn", 10).num_params() == 34826);
  CHECK(Model("mlp", 10).num_params() == 203530);
  CHECK(Model("cnn", 15).num_params() == 42831);
  const auto names = Model("cnn", 10).layer_names();
  CHECK(names == std::vector<std::string>{"conv2d", "max_pooling2d", "conv2d_1", "max_pooling2d_1",
                                          "flatten", "dropout", "dense"});
}

TEST_CASE(
    "NaN and Inf gradients: the optimizer's step finds them, and the check names their layer") {
  Model model("mlp", 10);  // flatten, dense (784x256 + 256), dropout, dense_1 (256x10 + 10)
  const size_t n = size_t(model.num_params()), dense_1 = size_t(model.param_offset(3));
  std::vector<float> g(n, 0.0f);
  const float finite[] = {-0.0f, 1e-45f, -3e38f, 3.4028235e38f, 1.0f};
  for (size_t i = 0; i < std::size(finite); ++i) g[i * 1000] = finite[i];
  ThreadPool pool(2);
  for (const char* name : {"adam", "sgd"})
    for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> p(n, 0.0f);
      auto opt = make_optimizer(name, int64_t(n), 0.9f);
      CHECK(opt->step(p.data(), g.data(), int64_t(n), 1e-3f, threads));
      CHECK(first_non_finite_layer(model, g).empty());
      for (float bad : {NAN, -NAN, INFINITY, -INFINITY})
        for (size_t at : {size_t(0), size_t(12345), dense_1 - 1, dense_1, n - 1}) {
          std::vector<float> h = g;
          h[at] = bad;
          CHECK_FALSE(opt->step(p.data(), h.data(), int64_t(n), 1e-3f, threads));
          CHECK(first_non_finite_layer(model, h) == (at < dense_1 ? "dense" : "dense_1"));
        }
    }
}

TEST_CASE("model specs: round trip through the canonical text, clear errors") {
  Model m("conv2d(8,5,same) relu maxpool2d flatten dense(classes,softmax)", 4);
  CHECK(Model(m.spec(), 4).spec() == m.spec());
  // A rate keeps every digit a float holds: the threads' copies and checkpoints rebuild the layer
  // from this text (with six digits, 0.9999999 came back as the invalid dropout(1)).
  for (const char* rate : {"0.2", "0.9999999", "0.4999999", "1e-07", "0"}) {
    const Model d(std::string("flatten dense(8,relu) dropout(") + rate + ") dense(classes,softmax)",
                  3);
    CHECK(d.spec() == std::string("flatten dense(8,relu) dropout(") + rate + ") dense(3,softmax)");
    CHECK(Model(d.spec(), 3).spec() == d.spec());
  }
  CHECK(m.layers()[0]->output_shape() == Shape{28, 28, 8});
  auto error_of = [](const std::string& spec, int classes = 10) {
    try {
      Model(spec, classes);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of("resnet").find("unknown layer or model 'resnet'") != std::string::npos);
  CHECK(error_of("flatten dense(0)").find("'0' is not a positive integer") != std::string::npos);
  CHECK(error_of("flatten dense(12)").find("expected 10") != std::string::npos);
  CHECK(error_of("dense(10)").find("put flatten before it") != std::string::npos);
  CHECK(error_of("flatten dropout(1.5) dense(10)").find("must be in [0, 1)") != std::string::npos);
  CHECK(error_of("conv2d(4,3 flatten").find("missing ')'") != std::string::npos);
  // 28 / 2 / 2 / 2 = 3: 9 outputs, one for each of 9 classes, and nothing to learn.
  CHECK(error_of("maxpool2d maxpool2d maxpool2d flatten", 9).find("no layer has weights") !=
        std::string::npos);
  // 28 x 28 x 5478275 = 2^32 + 304 values an image: flatten's count would wrap to 304.
  CHECK(error_of("conv2d(5478275,1,same) flatten dense(classes,softmax)")
            .find("values per image, more than this tool is meant for") != std::string::npos);
}

TEST_CASE("adam follows Keras' update") {
  std::vector<float> p = {1.0f}, g = {0.5f};
  Adam adam(1);
  adam.step(p.data(), g.data(), 1, 0.1f);
  // t=1: m = 0.05, v = 0.00025, lr_t = 0.1*sqrt(0.001)/0.1; p -= lr_t*m/(sqrt(v)+1e-7) = 0.1
  // (almost)
  CHECK(p[0] == Approx(1.0f - 0.1f).epsilon(1e-5));
  Sgd sgd(1, 0.9f);
  p = {1.0f};
  sgd.step(p.data(), g.data(), 1, 0.1f);
  sgd.step(p.data(), g.data(), 1, 0.1f);
  CHECK(p[0] == Approx(1.0f - 0.05f - (0.045f + 0.05f)));
  LrSchedule warm{0.1f, 0.4f, 3};
  CHECK(warm.at(0) == Approx(0.1f));
  CHECK(warm.at(2) == Approx(0.3f));
  CHECK(warm.at(10) == Approx(0.4f));
  CHECK(lr_scale("none", 4) == 1.0f);
  CHECK(lr_scale("linear", 4) == 4.0f);
  CHECK(lr_scale("sqrt", 4) == 2.0f);
  CHECK_THROWS_AS(lr_scale("cubic", 4), Error);
}

TEST_CASE(
    "adam over a long vector: Keras' rule element by element, the same bits on any x86 vector "
    "unit") {
  // 1000 values: the vector copies' wide loop and their tail. The reference repeats the rule
  // one operation at a time; on x86-64 without FMA (the portable build) it must match exactly,
  // as every copy of the update (SSE2, AVX2, AVX-512) must, so that ranks on different CPUs
  // keep equal weights.
  const size_t n = 1000;
  for (const float share : {1.0f, 0.25f}) {
    INFO("noise share " << share);
    std::vector<float> p(n), want(n), m(n, 0.0f), v(n, 0.0f);
    for (size_t i = 0; i < n; ++i) p[i] = want[i] = uniform01(5, i) - 0.5f;
    Adam adam(static_cast<int64_t>(n));
    adam.set_noise_share(share);
    for (int t = 1; t <= 3; ++t) {
      std::vector<float> g(n);
      for (size_t i = 0; i < n; ++i) g[i] = uniform01(uint64_t(t), i) - 0.5f;
      adam.step(p.data(), g.data(), int64_t(n), 0.01f);
      const double m_bias = 1.0 - std::pow(double(0.9f), t);  // as Adam does, from the float betas
      const float lr_t = float(0.01f * std::sqrt(1.0 - std::pow(double(0.999f), t)) / m_bias),
                  m_correction = float(1.0 / m_bias);
      for (size_t i = 0; i < n; ++i) {
        m[i] = 0.9f * m[i] + (1.0f - 0.9f) * g[i];
        float g2 = g[i] * g[i];
        if (share < 1.0f) {
          const float mean = m[i] * m_correction;
          g2 = g2 * share + (1.0f - share) * mean * mean;
        }
        v[i] = 0.999f * v[i] + (1.0f - 0.999f) * g2;
        want[i] -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-7f);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      INFO(i);
#if defined(__x86_64__) && !defined(__FMA__)
      REQUIRE(p[i] == want[i]);
#else
      REQUIRE(p[i] == Approx(want[i]).epsilon(1e-6));
#endif
    }
  }
}

TEST_CASE("adam with a noise share of 1/4 feeds v the second moment of the mean of 4 gradients") {
  // Constant gradients carry no noise: the estimate changes nothing (m^ is the gradient itself).
  std::vector<float> plain = {1.0f}, local = {1.0f}, g = {0.5f};
  Adam a(1), b(1);
  b.set_noise_share(1.0f / 4);
  for (int t = 0; t < 3; ++t)
    a.step(plain.data(), g.data(), 1, 0.1f), b.step(local.data(), g.data(), 1, 0.1f);
  CHECK(local[0] == Approx(plain[0]).epsilon(1e-6));
  // Alternating gradients +1, -1: at t = 2, m = 0.09 - 0.1 = -0.01, m^ = -0.01 / 0.19, and v gets
  // (1 - b2) * (b2 * (1/4 + 3/4 * 1) + (1/4 + 3/4 * m^2)) instead of (1 - b2) * (b2 + 1).
  Adam c(1);
  std::vector<float> p = {0.0f};
  const float up = 1.0f, down = -1.0f;
  c.set_noise_share(1.0f / 4);
  c.step(p.data(), &up, 1, 0.1f);
  c.step(p.data(), &down, 1, 0.1f);
  const double mhat = -0.01 / 0.19;
  const double v = 0.001 * (0.999 * 1.0 + (0.25 + 0.75 * mhat * mhat));
  CHECK(c.state()[1].second->at(0) == Approx(v).epsilon(1e-4));
}

TEST_CASE("a small training run lowers the loss and is deterministic for a seed") {
  test::TempDir dir;
  test::write_synthetic_dataset(dir / "d.h5", 400, 100, 5);
  TrainOptions o = test::short_run(
      dir / "d.h5", "conv2d(8,3,relu) maxpool2d flatten dropout(0.2) dense(classes,softmax)", 3,
      16);
  std::ostringstream out;
  Comm comm;
  const auto a = fit(o, comm, out);
  CHECK(a.epochs.back().loss < 0.5 * a.epochs.front().loss);
  CHECK(a.epochs.back().val_accuracy > 0.9);
  CHECK(out.str().find("Epoch 3/3") != std::string::npos);
  const auto b = fit(o, comm, out);
  CHECK(a.params == b.params);
  o.seed = 1;
  CHECK(fit(o, comm, out).params != a.params);
}

namespace {

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.insert(e.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE(
    "checkpoints are written to a temporary file of their own: another writer's is left alone") {
  test::TempDir dir;
  Model model("flatten dense(classes,softmax)", 3);
  model.init_params(1);
  auto opt = make_optimizer("adam", model.num_params(), 0.9f);
  // What a rank 0 of an earlier launch, still writing the same checkpoint, would use.
  std::ofstream(dir / "m.h5.tmp") << "an earlier launch's checkpoint, half written";
  save_checkpoint(dir / "m.h5", model, *opt, RunState{}, test::class_names(3));
  std::ifstream earlier(dir / "m.h5.tmp");
  CHECK(std::string(std::istreambuf_iterator<char>(earlier), {}) ==
        "an earlier launch's checkpoint, half written");
  CHECK(files_in(dir.path) == std::set<std::string>{"m.h5", "m.h5.tmp"});
  CHECK(load_checkpoint(dir / "m.h5").model.params() == model.params());
}

TEST_CASE("checkpoints: Keras names and shapes, exact round trip, resume equals uninterrupted") {
  test::TempDir dir;
  test::write_synthetic_dataset(dir / "d.h5", 200, 50, 4);
  TrainOptions o = test::short_run(dir / "d.h5", "cnn", 3, 8);
  o.steps_per_epoch = 5;
  o.checkpoint = dir / "full.h5";
  std::ostringstream out;
  Comm comm;
  const auto full = fit(o, comm, out);
  {
    auto f = h5::File::open_read(dir / "full.h5");
    // Keras' load_weights layout: layer_names, weight_names a layer, datasets named as Keras'
    // variables.
    CHECK(f.shape("/model_weights/conv2d_1/conv2d_1/kernel:0") ==
          std::vector<hsize_t>{3, 3, 32, 64});
    CHECK(f.shape("/model_weights/dense/dense/kernel:0") == std::vector<hsize_t>{1600, 4});
    CHECK(f.attr_strings("layer_names", "/model_weights") ==
          std::vector<std::string>{"conv2d", "max_pooling2d", "conv2d_1", "max_pooling2d_1",
                                   "flatten", "dropout", "dense"});
    CHECK(f.attr_strings("weight_names", "/model_weights/dense") ==
          std::vector<std::string>{"dense/kernel:0", "dense/bias:0"});
    CHECK(f.attr_strings("weight_names", "/model_weights/flatten").empty());
    CHECK(f.attr_string("backend", "/model_weights") == "tensorflow");
    CHECK(f.attr_double("epoch") == 3);
  }
  const Checkpoint c = load_checkpoint(dir / "full.h5");
  CHECK(c.model.params() == full.params);
  CHECK(c.state.step == 15);
  o.epochs = 1;
  o.checkpoint = dir / "part.h5";
  fit(o, comm, out);
  o.epochs = 3;
  o.resume = dir / "part.h5";
  CHECK(fit(o, comm, out).params == full.params);  // bitwise
  // No temporary file left.
  CHECK(files_in(dir.path) == std::set<std::string>{"d.h5", "full.h5", "part.h5"});
  o.epochs = 4;         // part.h5 holds 3 epochs now
  o.optimizer = "sgd";  // found while resuming, together: a usage error's exit code on every rank
  try {
    fit(o, comm, out);
    FAIL("resumed an adam checkpoint with sgd");
  } catch (const JointError& e) {
    CHECK(e.code == 2);
    CHECK(std::string(e.what()).find(
              "checkpoint was trained with --optimizer adam; resume with the same") !=
          std::string::npos);
  }
}
