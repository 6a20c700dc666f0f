// How the ranks' models meet: gradients averaged every step (the default), in 32- or 16-bit,
// optionally in buckets overlapped with backward; or local SGD, where each rank takes K steps
// alone and then the parameters are averaged.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pitrain/comm.h"

namespace pitrain {

enum class WireType { fp32, fp16, bf16 };
WireType parse_wire_type(const std::string& name);  // "fp32", "fp16", "bf16"; UsageError otherwise
std::string wire_type_name(WireType wire);

// IEEE binary16 and bfloat16, round to nearest even; overflow goes to infinity.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);

struct SyncOptions {
  int sync_every = 1;        // K: 1 averages gradients every step; K > 1 is local SGD
  int64_t sync_warmup = 0;   // steps of per-step gradient averaging before local SGD starts
  WireType wire = WireType::fp32;
  bool error_feedback = false;  // carry what 16-bit rounding drops into the next step
  bool overlap = false;         // start each bucket's allreduce as soon as backward has made it
  int64_t bucket_bytes = 1 << 20;
};

class GradientSync {
 public:
  GradientSync(dist::Comm& comm, int64_t n_params, const SyncOptions& opts);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Whether step `step` (0-based, global) averages gradients, or is a local SGD step; whether
  // the parameters are averaged after it; whether it communicates at all.
  bool averages_gradients(int64_t step) const;
  bool averages_parameters_after(int64_t step) const;
  bool communicates(int64_t step) const { return averages_gradients(step) || averages_parameters_after(step); }
  // Gradients [lo, hi) are final (backward walks from the last layer): with overlap, start
  // allreducing every full bucket. Call with decreasing ranges, ending at lo = 0.
  void gradients_ready(float* grads, int64_t lo);
  // Finishes the averaging of all gradients (starting what is left).
  void finish(float* grads);
  // Local SGD: average the parameters when `step` completes a round of K local steps, or when
  // `force` (the end of an epoch, unless just done). Returns whether it did. Each rank keeps its
  // own optimizer state: averaging Adam's moments too would triple the traffic.
  bool maybe_average_parameters(float* params, int64_t step, bool force);
  const std::vector<float>& residual() const { return residual_; }  // error feedback's carry

 private:
  void start_bucket(float* grads, int64_t lo, int64_t hi);
  dist::Comm& comm_;
  int64_t n_;
  SyncOptions o_;
  int64_t started_down_to_;  // gradients [started_down_to_, n) are in flight
  int64_t averaged_after_ = -1;  // the last step after which the parameters were averaged
  std::vector<uint16_t> wire_;       // 16-bit copies of the gradients, reduced in place
  std::vector<float> residual_;      // error feedback: what rounding dropped last step
  std::vector<MPI_Request> requests_;
  uint16_t (*narrow_)(float) = nullptr;  // the 16-bit format's conversions, chosen once
  float (*widen_)(uint16_t) = nullptr;
  MPI_Op sum_op_ = MPI_OP_NULL;
};

}  // namespace pitrain
