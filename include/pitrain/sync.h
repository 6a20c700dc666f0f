// How the ranks' models meet: gradients averaged every step (the default), in 32- or 16-bit,
// optionally in buckets overlapped with backward; or local SGD, where each rank takes K steps
// alone and then what the ranks learnt is averaged, optionally while the next K steps run.
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
  // Per-step sync: start each bucket's allreduce as soon as backward has made it. Local SGD:
  // average during the next K steps, and apply the average (plus those steps) one round late.
  bool overlap = false;
  int64_t bucket_bytes = 1 << 20;
};

class GradientSync {
 public:
  // `params`: the parameters every rank starts from (the first anchor of local SGD).
  GradientSync(Comm& comm, const float* params, int64_t n_params, const SyncOptions& opts);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Whether step `step` (0-based, global) averages gradients, or is a local SGD step; whether
  // the parameters are averaged after it; whether it communicates at all.
  bool averages_gradients(int64_t step) const;
  bool averages_parameters_after(int64_t step) const;
  int ranks() const { return comm_.size(); }
  bool communicates(int64_t step) const { return averages_gradients(step) || averages_parameters_after(step); }
  // Gradients [lo, hi) are final (backward walks from the last layer): with overlap, start
  // allreducing every full bucket. Call with decreasing ranges, ending at lo = 0.
  void gradients_ready(float* grads, int64_t lo);
  // Finishes the averaging of all gradients (starting what is left).
  void finish(float* grads);
  // Lets an allreduce in flight move on (MPI progresses only inside MPI calls).
  void progress() { comm_.progress(requests_); }
  // Local SGD, after the optimizer step `step`. A round averages what each rank learnt since the
  // last average (its parameters minus the common "anchor" they all held then) in the wire
  // format; with overlap it is applied at the next round, keeping the steps taken meanwhile.
  // `force` (epoch end, stop) leaves every rank with the same parameters. Each rank keeps its
  // own optimizer state: averaging Adam's moments too would triple the traffic.
  void maybe_average_parameters(float* params, int64_t step, bool force);
  const std::vector<float>& residual() const { return residual_; }  // error feedback's carry

 private:
  void start_sum(const float* values, int64_t lo, int64_t hi);  // values / P, summed over the ranks
  void wait_sums();                                              // then sums_ holds the results
  void start_round(const float* params, int64_t step);
  void finish_round(float* params, int64_t step);
  Comm& comm_;
  int64_t n_;
  SyncOptions o_;
  int64_t started_down_to_;      // gradients [started_down_to_, n) are in flight
  int64_t averaged_after_ = -1;  // the last step after which a parameter round started
  int64_t round_step_ = -1;      // the step whose parameter round is in flight; -1: none
  std::vector<float> out32_, sums_;         // fp32 wire: what this rank sends; the sums
  std::vector<uint16_t> out16_, in16_;      // 16-bit wire: the same, narrowed
  std::vector<float> residual_;             // error feedback: what rounding dropped last time
  std::vector<float> anchor_, delta_;       // local SGD: the last common parameters; what was sent
  std::vector<MPI_Request> requests_;
  uint16_t (*narrow_)(float) = nullptr;  // the 16-bit format's conversions, chosen once
  float (*widen_)(uint16_t) = nullptr;
  MPI_Op sum_op_ = MPI_OP_NULL;
};

}  // namespace pitrain
