#include "pitrain/matrix.h"

#ifdef PITRAIN_OPENBLAS
#include <cblas.h>
#endif

namespace pitrain {

#ifdef PITRAIN_OPENBLAS

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
              a, trans_a ? m : k, b, trans_b ? k : n, 0.0f, c, n);
}

std::string gemm_backend() { return "openblas"; }

void set_gemm_threads(int threads) {
  Eigen::setNbThreads(threads);
  openblas_set_num_threads(threads);
}

#else

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b, float* c) {
  MatrixView out(c, m, n);
  auto product = [&](const auto& lhs, const auto& rhs) { out.noalias() = lhs * rhs; };
  const ConstMatrixView A(a, trans_a ? k : m, trans_a ? m : k), B(b, trans_b ? n : k, trans_b ? k : n);
  if (trans_a && trans_b) product(A.transpose(), B.transpose());
  else if (trans_a) product(A.transpose(), B);
  else if (trans_b) product(A, B.transpose());
  else product(A, B);
}

std::string gemm_backend() { return "eigen"; }

void set_gemm_threads(int threads) { Eigen::setNbThreads(threads); }

#endif

}  // namespace pitrain
