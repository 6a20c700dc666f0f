// Eigen's GEMM built for one instruction set (PITRAIN_GEMM_ISA: avx512 or avx2), which gemm()
// calls on CPUs that have it (gemm.cpp says why). meson.build compiles this file once per
// instruction set. Eigen's templates are renamed into a namespace of the instruction set's own:
// compiled here with wider vectors, they must never be linked in place of the portable build's
// copies of the same templates (test/gemm_symbols.sh).
#define PITRAIN_JOIN2(a, b) a##b
#define PITRAIN_JOIN(a, b) PITRAIN_JOIN2(a, b)
#define Eigen PITRAIN_JOIN(pitrain_eigen_, PITRAIN_GEMM_ISA)
#include "gemm_eigen.h"

namespace pitrain {

void PITRAIN_JOIN(gemm_, PITRAIN_GEMM_ISA)(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                                           const float* b, int ldb, float* c, int ldc, const float* add_alpha) {
  eigen_gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, add_alpha);
}

}  // namespace pitrain
