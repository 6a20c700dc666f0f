// Single-process compute benchmark: images/s of forward + backward + Adam update for a model,
// batch and thread count (the engine of `pitrain train`: the batch split across a thread pool),
// and the GFLOP/s of one plain SGEMM through the same gemm(). Prints one JSON line. Driven by
// bench/compute.sh, which adds the PyTorch peer and the table.
#include <mpi.h>

#include <cstdio>
#include <cxxopts.hpp>
#include <stdexcept>
#include <vector>

#include "pitrain/clock.h"
#include "pitrain/matrix.h"
#include "pitrain/model.h"
#include "pitrain/optimizer.h"
#include "pitrain/rng.h"
#include "pitrain/threaded_model.h"

using namespace pitrain;

namespace {

std::vector<float> random_floats(size_t n, uint64_t key) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uniform01(key, i);
  return v;
}

void bench_model(const std::string& spec, int classes, int batch, int threads, int steps) {
  Model model(spec, classes);
  model.init_params(0);
  ThreadPool pool(threads);
  ThreadedModel threaded(model, pool);
  threaded.reserve(batch);
  Adam adam(model.num_params());
  const auto x = random_floats(size_t(batch) * 784, 1);
  std::vector<int32_t> y(static_cast<size_t>(batch));
  for (int i = 0; i < batch; ++i) y[size_t(i)] = i % classes;
  auto step = [&](int s) {
    threaded.forward_backward(x.data(), y.data(), batch, Context{true, uint64_t(s)});
    adam.step(model.params().data(), model.grads().data(), model.num_params(), 1e-3f,
              &threaded.pool());
  };
  for (int s = 0; s < 5; ++s) step(s);  // warm-up: caches, page faults, thread pools
  const double t0 = seconds_now();
  for (int s = 0; s < steps; ++s) step(s);
  const double seconds = seconds_now() - t0;
  const double images = double(batch) * steps / seconds;
  // GFLOP/s as a direct convolution counts them (Winograd does fewer multiplications).
  std::printf("{\"images_per_second\": %.1f, \"ms_per_step\": %.3f, \"gflops\": %.2f}\n", images,
              1e3 * seconds / steps, 3.0 * double(model.forward_flops()) * images / 1e9);
}

// Each GEMM of the build that this CPU runs (gemm_backends(), the one gemm() uses first).
void bench_sgemm(int m, int k, int n, int reps) {
  const auto a = random_floats(size_t(m) * k, 2), b = random_floats(size_t(k) * n, 3);
  std::vector<float> c(size_t(m) * n);
  auto run = [&] { gemm(false, false, m, n, k, a.data(), b.data(), c.data()); };
  std::string rows;
  for (const std::string& backend : gemm_backends()) {
    use_gemm_backend(backend);
    run();
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) {
      const double t0 = seconds_now();
      run();
      times.push_back(seconds_now() - t0);
    }
    char row[128];
    std::snprintf(row, sizeof row, "%s\"%s\": %.2f", rows.empty() ? "" : ", ", backend.c_str(),
                  2.0 * m * k * n / median(times) / 1e9);
    rows += row;
  }
  std::printf("{\"sgemm_gflops\": {%s}}\n", rows.c_str());
}

void run_bench(int argc, char** argv) {
  cxxopts::Options options("compute_bench", "images/s of one training step, or SGEMM GFLOP/s");
  options.add_options()("model", "Model name or spec",
                        cxxopts::value<std::string>()->default_value("cnn"))(
      "classes", "Classes", cxxopts::value<int>()->default_value("15"))(
      "batch", "Batch size", cxxopts::value<int>()->default_value("32"))(
      "threads", "Threads", cxxopts::value<int>()->default_value("1"))(
      "steps", "Timed steps", cxxopts::value<int>()->default_value("200"))(
      "sgemm", "Time C(MxN) = A(MxK) B(KxN) instead, given as M,K,N",
      cxxopts::value<std::vector<int>>())("help", "This help");
  const auto r = options.parse(argc, argv);
  if (r.count("help")) {
    std::printf("%s\n", options.help().c_str());
  } else if (r.count("sgemm")) {
    const auto d = r["sgemm"].as<std::vector<int>>();
    if (d.size() != 3)
      throw std::invalid_argument("--sgemm takes three sizes M,K,N, e.g. --sgemm 3872,288,64");
    set_gemm_threads(1);
    bench_sgemm(d[0], d[1], d[2], 50);
  } else {
    bench_model(r["model"].as<std::string>(), r["classes"].as<int>(), r["batch"].as<int>(),
                r["threads"].as<int>(), r["steps"].as<int>());
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    run_bench(argc, argv);
  } catch (const std::exception& e) {  // a bad flag or model spec: one line, not a stack trace
    std::fprintf(stderr, "compute_bench: %s (see --help)\n", e.what());
    status = 2;
  }
  MPI_Finalize();
  return status;
}
