// The wire formats' table, what every format shares (buckets, requests, the division by P), and
// fp32, which sends the values as they are.
#include "pitrain/wire.h"

#include <limits>

#include "pitrain/error.h"

namespace pitrain {
namespace {

class Fp32Average : public WireAverage {
 public:
  Fp32Average(Comm& comm, int64_t n) : WireAverage(comm, n), out_(size_t(n)) {}
  ~Fp32Average() override { wait_in_flight(); }

 private:
  MPI_Request send(const float* values, float scale, int64_t lo, int64_t hi) override {
    for (int64_t i = lo; i < hi; ++i) out_[size_t(i)] = values[i] * scale;
    MPI_Request req;
    comm_.start_allreduce(out_.data() + lo, averages_.data() + lo, int(hi - lo), MPI_FLOAT, MPI_SUM,
                          &req);
    return req;
  }
  // (n) what this rank sends: Open MPI's libnbc reduces in place by a tree.
  std::vector<float> out_;
};

std::unique_ptr<WireAverage> make_fp32_average(Comm& comm, int64_t n, const WireOptions&) {
  return std::make_unique<Fp32Average>(comm, n);
}

struct WireFormat {
  WireType type;
  const char* name;
  std::unique_ptr<WireAverage> (*make)(Comm&, int64_t n, const WireOptions&);
  int64_t (*bytes)(int64_t n, const WireOptions&);
};

const WireFormat kWireFormats[] = {
    {WireType::fp32, "fp32", make_fp32_average,
     [](int64_t n, const WireOptions&) { return 4 * n; }},
    {WireType::fp16, "fp16", make_fp16_average,
     [](int64_t n, const WireOptions&) { return 2 * n; }},
    {WireType::bf16, "bf16", make_bf16_average,
     [](int64_t n, const WireOptions&) { return 2 * n; }},
    {WireType::int8, "int8", make_int8_average,
     [](int64_t n, const WireOptions&) { return int8_wire_bytes(n); }},
    {WireType::int4, "int4", make_int4_average,
     [](int64_t n, const WireOptions&) { return int4_wire_bytes(n); }},
    {WireType::powersgd, "powersgd", make_powersgd_average, powersgd_wire_bytes},
};

const WireFormat& format_of(WireType wire) {
  for (const auto& f : kWireFormats)
    if (f.type == wire) return f;
  throw Error("wire format " + std::to_string(int(wire)) +
              " has no row in kWireFormats (wire.cpp)");
}

}  // namespace

std::optional<WireType> wire_type_named(const std::string& name) {
  for (const auto& f : kWireFormats)
    if (name == f.name) return f.type;
  return std::nullopt;
}

std::string wire_type_name(WireType wire) { return format_of(wire).name; }

std::vector<std::string> wire_type_names() {
  std::vector<std::string> names;
  for (const auto& f : kWireFormats) names.push_back(f.name);
  return names;
}

std::unique_ptr<WireAverage> make_wire_average(WireType wire, Comm& comm, int64_t n,
                                               const WireOptions& opts) {
  return format_of(wire).make(comm, n, opts);
}

int64_t wire_bytes(WireType wire, int64_t n, const WireOptions& opts) {
  return format_of(wire).bytes(n, opts);
}

WireAverage::WireAverage(Comm& comm, int64_t n) : comm_(comm), n_(n), averages_(size_t(n)) {
  // A range goes in one allreduce call, whose count is an int.
  if (n > std::numeric_limits<int>::max())
    throw Error("wire: a model of " + std::to_string(n) +
                " parameters; the wire formats average at most 2^31 - 1");
}

void WireAverage::wait_in_flight() {
  if (!requests_.empty()) comm_.wait_all(requests_);
  requests_.clear();
}

void WireAverage::start(const float* values, int64_t lo, int64_t hi) {
  requests_.push_back(send(values, 1.0f / float(comm_.size()), lo, hi));
}

void WireAverage::progress() {
  if (requests_.empty() || !comm_.progress(requests_)) return;
  requests_.clear();
  const MPI_Request next = next_phase();
  if (next != MPI_REQUEST_NULL) requests_.push_back(next);
}

const std::vector<float>& WireAverage::finish() {
  while (true) {
    comm_.wait_all(requests_);
    requests_.clear();
    const MPI_Request next = next_phase();
    if (next == MPI_REQUEST_NULL) break;
    requests_.push_back(next);
  }
  receive();
  return averages_;
}

}  // namespace pitrain
