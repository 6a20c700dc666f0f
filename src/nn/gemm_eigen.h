// Row-major C (m, n) = op(A) op(B) by Eigen's own kernels, in the instruction set of the file
// that includes this (gemm.cpp: the build's; gemm_avx512.cpp: AVX-512). Internal linkage, so
// that each includer keeps its own copy.
#pragma once
#include <Eigen/Core>

namespace pitrain {
namespace {

void eigen_gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b, float* c) {
  using Rows = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<Rows> out(c, m, n);
  const Eigen::Map<const Rows> A(a, trans_a ? k : m, trans_a ? m : k), B(b, trans_b ? n : k, trans_b ? k : n);
  auto product = [&](const auto& lhs, const auto& rhs) { out.noalias() = lhs * rhs; };
  if (trans_a && trans_b) product(A.transpose(), B.transpose());
  else if (trans_a) product(A.transpose(), B);
  else if (trans_b) product(A, B.transpose());
  else product(A, B);
}

}  // namespace
}  // namespace pitrain
