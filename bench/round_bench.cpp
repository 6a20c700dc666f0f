// CPU of one average in each wire format for a model's parameter vector, on one rank: what a
// round costs a rank beyond the link (rounding into blocks, PowerSGD's factors and their GEMMs,
// decoding), which on a small host is paid out of the steps' time. One process, so the MPI sum is
// of one rank: it times no link and no reduction of two ranks' blocks. The values are sums of
// uniforms, near Gaussian, as a round's changes and PowerSGD's factors are. Prints one line a
// format: ms a round (the median of --rounds timings, each the mean of --reps rounds).
// usage: mpirun -np 1 build/bench/round_bench [--model mlp] [--classes 15] [--formats
// bf16,int8,int4,powersgd]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cxxopts.hpp>
#include <sstream>
#include <vector>

#include "pitrain/clock.h"
#include "pitrain/model.h"
#include "pitrain/rng.h"
#include "pitrain/sync.h"

using namespace pitrain;

namespace {

double ms_a_round(WireType wire, int64_t n, const WireOptions& opts, int rounds, int reps) {
  Comm comm(MPI_COMM_WORLD);
  const auto average = make_wire_average(wire, comm, n, opts);
  std::vector<float> values(static_cast<size_t>(n));
  for (size_t i = 0; i < values.size(); ++i) {
    float sum = 0;
    for (uint64_t k = 0; k < 4; ++k) sum += uniform01(rng_key(k), i);
    values[i] = 1e-3f * (sum - 2.0f);
  }
  auto round = [&] {
    average->start(values.data(), 0, n);
    average->finish();
  };
  round();
  std::vector<double> ms;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = seconds_now();
    for (int i = 0; i < reps; ++i) round();
    ms.push_back((seconds_now() - t0) / reps * 1e3);
  }
  return median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  cxxopts::Options options("round_bench", "CPU of one average in each wire format, one rank");
  options.add_options()("model", "Model", cxxopts::value<std::string>()->default_value("mlp"))(
      "classes", "Classes", cxxopts::value<int>()->default_value("15"))(
      "formats", "Wire formats",
      cxxopts::value<std::string>()->default_value("bf16,int8,int4,powersgd"))(
      "powersgd-rank", "PowerSGD's rank", cxxopts::value<int>()->default_value("16"))(
      "rounds", "Timings (the median is printed)", cxxopts::value<int>()->default_value("7"))(
      "reps", "Rounds a timing", cxxopts::value<int>()->default_value("100"));
  int status = 0;
  try {
    const auto args = options.parse(argc, argv);
    if (args["rounds"].as<int>() < 1 || args["reps"].as<int>() < 1)
      throw std::runtime_error("--rounds and --reps must be 1 or more");
    const std::string model_name = args["model"].as<std::string>();
    const Model model(model_name, args["classes"].as<int>());
    const int64_t n = model.num_params();
    const WireOptions opts{true, args["powersgd-rank"].as<int>(), weight_matrices(model)};
    std::stringstream formats(args["formats"].as<std::string>());
    for (std::string name; std::getline(formats, name, ',');) {
      const auto wire = wire_type_named(name);
      if (!wire) throw std::runtime_error("--formats: unknown wire format '" + name + "'");
      const double ms =
          ms_a_round(*wire, n, opts, args["rounds"].as<int>(), args["reps"].as<int>());
      std::printf("%s %s: %.3f ms a round (%lld parameters, %lld bytes a rank sends)\n",
                  model_name.c_str(), name.c_str(), ms, static_cast<long long>(n),
                  static_cast<long long>(wire_bytes(*wire, n, opts)));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "round_bench: %s\n", e.what());
    status = 2;
  }
  MPI_Finalize();
  return status;
}
