// PowerSGD (Vogels, Karimireddy and Jaggi, 2019): each 2-D weight M (rows, cols) travels as two
// thin factors. P = M Q (rows, r) is averaged and orthonormalised, then Q = M^T P (cols, r) is
// averaged, and the mean of the ranks' M is approximated by P Q^T: one power iteration a
// round, warm-started from the last Q, so the approximation sharpens over the rounds. What it
// leaves out stays in this rank's residual and goes with the next round: error feedback is
// always on, since without it a low-rank approximation would lose the rest for good. A rank's
// residual is its own M less its projection P P^T M (as its Q was rounded for the wire), not M
// less the mean's approximation: the ranks' residuals have the same mean either way, but only
// this one is the rank's own, which local SGD keeps in the rank's model (local_sgd.cpp). Weights
// too small to gain (biases, a kernel whose factors are not under half its size) go as they are
// beside P. Everything travels in int4 blocks (BlockSum: a scale each 64 values), each factor
// column from blocks of its own, so that the weak directions keep their own scale: at about the
// bytes of rank 8 in int8, rank 16 in int4 reaches the target sooner, and as soon as rank 16 in
// int8 (bench/sync_accuracy.sh). Two allreduces a round, whatever the model's depth.
#include <algorithm>
#include <string>
#include <utility>

#include "pitrain/error.h"
#include "pitrain/matrix.h"
#include "pitrain/rng.h"
#include "pitrain/wire.h"

namespace pitrain {
namespace {

// Where a round travels: the P factors of the weights compressed at rank r and the rest (the
// weights between them, in offset order, as ranges), each part from a block of its own, in the
// first allreduce; the Q factors in the second. A factor travels column by column, each column
// from a block of its own: a column's values share their scale, and a weak direction (the last
// columns of P and Q, far smaller than the first) keeps its own levels.
struct Layout {
  int r;
  std::vector<WireMatrix> matrices;               // the compressed weights
  std::vector<std::pair<int64_t, int64_t>> rest;  // [from, to) ranges sent as they are
  int64_t first = 0, second = 0;                  // values of each allreduce
  int64_t rest_at = 0;                            // where the rest starts in the first
  int64_t p_floats = 0, q_floats = 0;             // all factors, (rows, r) and (cols, r) each
  static int64_t whole_blocks(int64_t values) {
    return (values + kInt4BlockValues - 1) / kInt4BlockValues * kInt4BlockValues;
  }
  int64_t p_values(const WireMatrix& m) const { return r * whole_blocks(m.rows); }  // on the wire
  int64_t q_values(const WireMatrix& m) const { return r * whole_blocks(m.cols); }
};

// A weight is worth compressing when its factors (in whole blocks) are under half of it. mlp's
// 256x15 kernel goes whole: compressed at rank 6, it takes 4 ranks longer to the target
// (bench/sync_accuracy.sh).
Layout layout_of(int64_t n, const WireOptions& opts) {
  Layout out{opts.low_rank, {}, {}, 0, 0, 0, 0};
  int64_t at = 0;
  for (const WireMatrix& m : opts.matrices) {  // in offset order
    if (2 * (out.p_values(m) + out.q_values(m)) >= m.rows * m.cols) continue;
    out.matrices.push_back(m);
    if (m.offset > at) out.rest.push_back({at, m.offset});
    at = m.offset + m.rows * m.cols;
    out.first += out.p_values(m), out.second += out.q_values(m);
    out.p_floats += m.rows * out.r, out.q_floats += m.cols * out.r;
  }
  if (at < n) out.rest.push_back({at, n});
  out.rest_at = out.first;
  for (const auto& [from, to] : out.rest) out.first += out.whole_blocks(to - from);
  return out;
}

// x (rows, r) row-major <-> r columns on the wire, each `stride` values (the tail zero).
void to_columns(const float* x, int64_t rows, int r, int64_t stride, float* wire) {
  for (int j = 0; j < r; ++j) {
    for (int64_t i = 0; i < rows; ++i) wire[j * stride + i] = x[i * r + j];
    std::fill(wire + j * stride + rows, wire + (j + 1) * stride, 0.0f);
  }
}
void from_columns(const float* wire, int64_t rows, int r, int64_t stride, float* x) {
  for (int j = 0; j < r; ++j)
    for (int64_t i = 0; i < rows; ++i) x[i * r + j] = wire[j * stride + i];
}

// Orthonormal columns by Gram-Schmidt, twice ("twice is enough": once leaves the columns of a
// nearly dependent P far from orthogonal); p: (rows, r), row-major. A column that is (nearly)
// a combination of the ones before, as when the weight's rank is below r, becomes zero, and a
// zero column adds nothing to P Q^T. On a column-major copy: P's columns are strided in place.
void orthonormalise(float* p, int64_t rows, int r) {
  Eigen::MatrixXf m = MatrixView(p, rows, r);
  for (int j = 0; j < r; ++j) {
    const float before = m.col(j).norm();
    for (int pass = 0; pass < 2; ++pass)
      for (int i = 0; i < j; ++i) m.col(j) -= m.col(i).dot(m.col(j)) * m.col(i);
    const float after = m.col(j).norm();
    if (after > 1e-4f * before && after > 0)
      m.col(j) /= after;
    else
      m.col(j).setZero();
  }
  MatrixView(p, rows, r) = m;
}

class PowerSgdAverage : public WireAverage {
 public:
  PowerSgdAverage(Comm& comm, int64_t n, const WireOptions& opts)
      : WireAverage(comm, n),
        layout_(layout_of(n, opts)),
        p_(size_t(layout_.p_floats)),
        q_(size_t(layout_.q_floats)),
        first_(size_t(layout_.first)),
        dropped_(size_t(std::max(layout_.first, layout_.second))),
        second_(size_t(layout_.second)),
        own_second_(second_.size()),
        sum_first_(make_int4_sum(layout_.first)),
        sum_second_(make_int4_sum(layout_.second)) {
    residual_.assign(size_t(n), 0.0f);
    // Q starts random, the same on every rank; from then on it is the last round's average.
    for (size_t i = 0; i < q_.size(); ++i) q_[i] = random_q(i);
  }
  ~PowerSgdAverage() override { wait_in_flight(); }
  bool whole_vector() const override { return true; }

 private:
  // Phase 1: P = M Q for every compressed weight, and the rest as it is. The residual takes
  // the values sent (values + residual: the round's M) until receive() leaves in it what they
  // had beyond P Q^T, and the rest's rounding here: one (n) buffer fewer, which counts where
  // hosts share one L3 cache.
  MPI_Request send(const float* values, float scale, int64_t lo, int64_t hi) override {
    if (lo != 0 || hi != n_)
      throw Error("PowerSGD averages the whole vector at once: got [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + ") of " + std::to_string(n_));
    float* a = residual_.data();
    for (int64_t i = 0; i < n_; ++i) a[i] += values[i];
    scale_ = scale;
    const int r = layout_.r;
    float* wire = first_.data();
    float* p = p_.data();
    const float* q = q_.data();
    for (const WireMatrix& m : layout_.matrices) {
      gemm(false, false, int(m.rows), r, int(m.cols), &a[m.offset], q, p);
      for (int64_t i = 0; i < m.rows * r; ++i) p[i] *= scale;
      to_columns(p, m.rows, r, layout_.whole_blocks(m.rows), wire);
      wire += layout_.p_values(m), p += m.rows * r, q += m.cols * r;
    }
    for (const auto& [from, to] : layout_.rest) {
      for (int64_t i = from; i < to; ++i) wire[i - from] = a[i] * scale;
      wire += layout_.whole_blocks(to - from);
    }
    const MPI_Request req =
        sum_first_->start(comm_, first_.data(), int64_t(first_.size()), dropped_.data());
    const float* dropped = &dropped_[size_t(layout_.rest_at)];
    for (const auto& [from, to] : layout_.rest) {
      for (int64_t i = from; i < to; ++i) residual_[size_t(i)] = dropped[i - from] / scale;
      dropped += layout_.whole_blocks(to - from);
    }
    phase_ = 1;
    return req;
  }

  // Phase 2: P averaged and orthonormalised on every rank alike, then Q = M^T P.
  MPI_Request next_phase() override {
    if (phase_ != 1) {  // Q arrived (or nothing was in flight): the round is complete
      phase_ = 0;
      return MPI_REQUEST_NULL;
    }
    sum_first_->read(first_.data(), int64_t(first_.size()));
    const int r = layout_.r;
    const float* p_wire = first_.data();
    float* q_wire = second_.data();
    float* p = p_.data();
    float* q = q_.data();
    for (const WireMatrix& m : layout_.matrices) {
      from_columns(p_wire, m.rows, r, layout_.whole_blocks(m.rows), p);
      orthonormalise(p, m.rows, r);
      gemm(true, false, int(m.cols), r, int(m.rows), &residual_[size_t(m.offset)], p, q);
      for (int64_t i = 0; i < m.cols * r; ++i) q[i] *= scale_;
      to_columns(q, m.cols, r, layout_.whole_blocks(m.cols), q_wire);
      p_wire += layout_.p_values(m), q_wire += layout_.q_values(m), p += m.rows * r,
          q += m.cols * r;
    }
    phase_ = 2;
    own_second_ = second_;
    const MPI_Request req =
        sum_second_->start(comm_, second_.data(), int64_t(second_.size()), dropped_.data());
    for (size_t i = 0; i < own_second_.size(); ++i) own_second_[i] -= dropped_[i];
    return req;
  }

  // The average: P Q^T for the compressed weights, the rest's mean; the residual is what this
  // rank's values had beyond their own projection on P.
  void receive() override {
    sum_second_->read(second_.data(), int64_t(second_.size()));
    const int r = layout_.r;
    const float* q_wire = second_.data();
    const float* own_wire = own_second_.data();
    const float* p = p_.data();
    float* q = q_.data();
    for (const WireMatrix& m : layout_.matrices) {
      // This rank's own Q as sent: its residual is what P P^T leaves of its own values (up to
      // here the residual holds the values sent).
      from_columns(own_wire, m.cols, r, layout_.whole_blocks(m.cols), q);
      gemm_add(false, true, int(m.rows), int(m.cols), r, -1.0f / scale_, p, q,
               &residual_[size_t(m.offset)]);
      from_columns(q_wire, m.cols, r, layout_.whole_blocks(m.cols), q);
      gemm(false, true, int(m.rows), int(m.cols), r, p, q, &averages_[size_t(m.offset)]);
      restart_zero_columns(q, m.cols, r, size_t(q - q_.data()));
      q_wire += layout_.q_values(m), own_wire += layout_.q_values(m), p += m.rows * r,
          q += m.cols * r;
    }
    const float* rest = &first_[size_t(layout_.rest_at)];
    for (const auto& [from, to] : layout_.rest) {
      std::copy(rest, rest + (to - from), &averages_[size_t(from)]);
      rest += layout_.whole_blocks(to - from);
    }
  }

  static float random_q(size_t i) { return 2 * uniform01(rng_key(0x9051d), uint64_t(i)) - 1; }

  // A column of Q that came back zero (its direction found nothing: a round of zeros, or a
  // weight of rank under r) would warm-start every later round at zero, and M 0 = 0: that
  // direction, or the whole weight, would never travel again. It starts random again instead,
  // as on every rank alike (the sum is the same everywhere).
  void restart_zero_columns(float* q, int64_t cols, int r, size_t at) {
    for (int j = 0; j < r; ++j) {
      bool zero = true;
      for (int64_t i = 0; i < cols && zero; ++i) zero = q[i * r + j] == 0.0f;
      if (zero)
        for (int64_t i = 0; i < cols; ++i) q[i * r + j] = random_q(at + size_t(i * r + j));
    }
  }

  Layout layout_;
  // The factors, (rows, r) and (cols, r) a weight: P orthonormalised; Q the last round's sum,
  // which warm-starts the next.
  std::vector<float> p_, q_;
  // On the wire: P's columns, then the rest: this rank's, then (from phase 2 on) the ranks' sum.
  std::vector<float> first_, dropped_;  // dropped_: what rounding took from first_, then second_
  std::vector<float> second_;           // Q's columns: this rank's, then the sum
  std::vector<float> own_second_;       // this rank's Q's columns as rounded for the wire
  std::unique_ptr<BlockSum> sum_first_, sum_second_;
  float scale_ = 1;
  int phase_ = 0;  // 1: P in flight, 2: Q in flight
};

}  // namespace

std::unique_ptr<WireAverage> make_powersgd_average(Comm& comm, int64_t n, const WireOptions& opts) {
  return std::make_unique<PowerSgdAverage>(comm, n, opts);
}

int64_t powersgd_wire_bytes(int64_t n, const WireOptions& opts) {
  const Layout layout = layout_of(n, opts);
  return int4_wire_bytes(layout.first) + int4_wire_bytes(layout.second);
}

}  // namespace pitrain
