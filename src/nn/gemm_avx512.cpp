// Eigen's GEMM built for AVX-512, which gemm() calls on CPUs that have it (gemm.cpp says why).
// Eigen's templates are renamed into a namespace of their own: compiled here with AVX-512, they
// must never be linked in place of the portable build's copies of the same templates.
#define Eigen pitrain_eigen_avx512
#include "gemm_eigen.h"

namespace pitrain {

void gemm_avx512(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                 int ldc) {
  eigen_gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
}

}  // namespace pitrain
