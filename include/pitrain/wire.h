// Wire formats: how the ranks' float vectors travel when they are averaged (fp32, fp16 and
// bf16 at half the bytes, int8 and int4 with a scale a block at about a quarter and an eighth,
// with optional error feedback; PowerSGD sends the 2-D weights as low-rank factors, tens of
// times smaller). Which vectors are averaged, and when, is the sync strategy's concern
// (sync.h); a new format is one row in wire.cpp's table and a file.
#pragma once
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pitrain/comm.h"

namespace pitrain {

enum class WireType { fp32, fp16, bf16, int8, int4, powersgd };
std::optional<WireType> wire_type_named(const std::string& name);
std::string wire_type_name(WireType wire);
std::vector<std::string> wire_type_names();

// IEEE binary16 and bfloat16, round to nearest even; overflow goes to infinity.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);

// A 2-D weight inside the averaged vector: values[offset, offset + rows * cols), row-major
// (a dense kernel (in, out); a conv kernel (kh, kw, cin, cout) as (kh * kw * cin, cout)).
struct WireMatrix {
  int64_t offset, rows, cols;
};

struct WireOptions {
  bool error_feedback = false;
  int low_rank = 4;                  // PowerSGD's rank
  std::vector<WireMatrix> matrices;  // what a low-rank format may compress; the rest goes whole
};

// Averages an (n) float vector over the ranks, in ranges started one after another (buckets)
// and finished together. Values are divided by P before they are summed, so a 16-bit sum of P
// ranks cannot overflow where one rank's value would not.
class WireAverage {
 public:
  WireAverage(Comm& comm, int64_t n);
  virtual ~WireAverage() = default;
  WireAverage(const WireAverage&) = delete;
  WireAverage& operator=(const WireAverage&) = delete;

  int64_t size() const { return n_; }
  // Averages values[lo, hi); a format that needs the whole vector (whole_vector()) takes 0, n.
  void start(const float* values, int64_t lo, int64_t hi);
  // Waits for every started range; the averages (n) are valid in the ranges started.
  const std::vector<float>& finish();
  void progress();  // MPI moves collectives only inside MPI calls
  virtual bool whole_vector() const { return false; }
  // Error feedback: what rounding dropped from the last values sent, added to the next, in the
  // values' units (before the division by P; empty when off, or for a lossless format). Read
  // it between averages: during one, PowerSGD keeps there the values it sends.
  const std::vector<float>& residual() const { return residual_; }
  // Once the residual's values have reached the other ranks another way (local SGD's last
  // agreement sends them whole), or are kept elsewhere (local SGD's rounds: in the rank's model).
  void clear_residual() { std::fill(residual_.begin(), residual_.end(), 0.0f); }
  // The residual becomes values (n): what was kept elsewhere comes back.
  void return_residual(const float* values) {
    std::copy(values, values + residual_.size(), residual_.begin());
  }

 protected:
  // Puts (values[lo, hi) plus the residual) x scale in the send buffer and starts their sum.
  virtual MPI_Request send(const float* values, float scale, int64_t lo, int64_t hi) = 0;
  virtual void receive() {}  // after every sum arrived: turn them into averages_
  // A format in phases (PowerSGD: P, then Q from P) starts the next once the last one's sums
  // arrived; MPI_REQUEST_NULL when there is none.
  virtual MPI_Request next_phase() { return MPI_REQUEST_NULL; }
  // Waits for what is still in flight. Every format's destructor calls it first, while the
  // buffers that MPI reads and writes still exist (this class's destructor runs after theirs).
  void wait_in_flight();
  Comm& comm_;
  int64_t n_;
  std::vector<float> averages_;  // (n)
  std::vector<float> residual_;  // (n) with error feedback in a lossy format, else empty

 private:
  std::vector<MPI_Request> requests_;
};

// A sum over the ranks of up to max_count floats in int4 blocks, as the int4 format sends them:
// for a format built on it (PowerSGD's factors).
class BlockSum {
 public:
  virtual ~BlockSum() = default;
  // Rounds values[0, count) into blocks (dropped[0, count), if given: what rounding took from
  // each) and starts their sum.
  virtual MPI_Request start(Comm& comm, const float* values, int64_t count, float* dropped) = 0;
  virtual void read(float* sums, int64_t count) const = 0;  // once the request completed
};
constexpr int64_t kInt4BlockValues = 64;  // values[64 k, 64 (k + 1)) share a scale
std::unique_ptr<BlockSum> make_int4_sum(int64_t max_count);

std::unique_ptr<WireAverage> make_wire_average(WireType wire, Comm& comm, int64_t n,
                                               const WireOptions& opts);
// Bytes a rank hands to the allreduces of one average of all n values.
int64_t wire_bytes(WireType wire, int64_t n, const WireOptions& opts);

// The narrow formats, each from its file (the table in wire.cpp lists them).
std::unique_ptr<WireAverage> make_fp16_average(Comm& comm, int64_t n, const WireOptions& opts);
std::unique_ptr<WireAverage> make_bf16_average(Comm& comm, int64_t n, const WireOptions& opts);
std::unique_ptr<WireAverage> make_int8_average(Comm& comm, int64_t n, const WireOptions& opts);
std::unique_ptr<WireAverage> make_int4_average(Comm& comm, int64_t n, const WireOptions& opts);
std::unique_ptr<WireAverage> make_powersgd_average(Comm& comm, int64_t n, const WireOptions& opts);
int64_t int8_wire_bytes(int64_t n);
int64_t int4_wire_bytes(int64_t n);
int64_t powersgd_wire_bytes(int64_t n, const WireOptions& opts);

}  // namespace pitrain
