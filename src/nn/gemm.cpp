#include "pitrain/matrix.h"

#ifdef PITRAIN_OPENBLAS
#include <cblas.h>
#else
#include "gemm_eigen.h"
#endif

namespace pitrain {

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b, float* c) {
  gemm(trans_a, trans_b, m, n, k, a, trans_a ? m : k, b, trans_b ? k : n, c, n);
}

#ifdef PITRAIN_GEMM_AVX512
// On CPUs with AVX-512, Eigen's kernels built for it (gemm_avx512.cpp) beat Debian's OpenBLAS
// 0.3.21, whose kernels stop at AVX2 there: 140-190 against 85-105 GFLOP/s a core on cnn's and
// mlp's shapes (AMD EPYC, family 26), and take no lock (OpenBLAS takes one global mutex twice a
// call, which two threads making cnn's ~450 small GEMMs a step contend for; bench/RESULTS.md,
// fifteenth pass).
void gemm_avx512(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                 int ldc);

namespace {
bool use_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  return yes;
}
}  // namespace
#endif

#ifdef PITRAIN_OPENBLAS

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
          int ldc) {
#ifdef PITRAIN_GEMM_AVX512
  if (use_avx512()) return gemm_avx512(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
#endif
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
              a, lda, b, ldb, 0.0f, c, ldc);
}

std::string gemm_backend() {
#ifdef PITRAIN_GEMM_AVX512
  if (use_avx512()) return "eigen-avx512";
#endif
  return "openblas";
}

void set_gemm_threads(int threads) {
  Eigen::setNbThreads(threads);
  openblas_set_num_threads(threads);
}

#else

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
          int ldc) {
  eigen_gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
}

std::string gemm_backend() { return "eigen"; }

void set_gemm_threads(int threads) { Eigen::setNbThreads(threads); }

#endif

}  // namespace pitrain
