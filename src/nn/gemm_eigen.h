// Row-major C (m, n) = op(A) op(B), or C += alpha op(A) op(B), by Eigen's own kernels, in the
// instruction set of the file that includes this (gemm.cpp: the build's; gemm_isa.cpp: AVX-512 or
// AVX2). Internal linkage, so that each includer keeps its own copy.
#pragma once
#include <Eigen/Core>

namespace pitrain {
namespace {

template <class Out, class A, class B>
void eigen_assign(Out& out, const A& a, const B& b, const float* add_alpha) {
  if (add_alpha)
    out.noalias() += (*add_alpha * a) * b;
  else
    out.noalias() = a * b;
}

template <class Out, class In>
void eigen_product(bool trans_a, bool trans_b, Out out, const In& a, const In& b,
                   const float* add_alpha) {
  if (trans_a && trans_b)
    eigen_assign(out, a.transpose(), b.transpose(), add_alpha);
  else if (trans_a)
    eigen_assign(out, a.transpose(), b, add_alpha);
  else if (trans_b)
    eigen_assign(out, a, b.transpose(), add_alpha);
  else
    eigen_assign(out, a, b, add_alpha);
}

// add_alpha: C += *add_alpha op(A) op(B); nullptr: C = op(A) op(B).
void eigen_gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                const float* b, int ldb, float* c, int ldc, const float* add_alpha) {
  using Rows = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k, b_rows = trans_b ? n : k,
            b_cols = trans_b ? k : n;
  // Whole matrices through maps without a run-time stride: strided maps for every GEMM make cnn
  // at batch 32 train slower (bench/compute.sh).
  if (lda == a_cols && ldb == b_cols && ldc == n) {
    using Whole = Eigen::Map<const Rows>;
    eigen_product(trans_a, trans_b, Eigen::Map<Rows>(c, m, n), Whole(a, a_rows, a_cols),
                  Whole(b, b_rows, b_cols), add_alpha);
  } else {
    using Stride = Eigen::OuterStride<>;
    using Block = Eigen::Map<const Rows, 0, Stride>;
    eigen_product(trans_a, trans_b, Eigen::Map<Rows, 0, Stride>(c, m, n, Stride(ldc)),
                  Block(a, a_rows, a_cols, Stride(lda)), Block(b, b_rows, b_cols, Stride(ldb)),
                  add_alpha);
  }
}

}  // namespace
}  // namespace pitrain
