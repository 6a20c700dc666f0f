// Eigen's GEMM and gemm_unpacked's kernel built for one instruction set (PITRAIN_GEMM_ISA:
// avx512 or avx2), which gemm() and gemm_unpacked() call on CPUs that have it (gemm.cpp says
// why). meson.build compiles this file once per instruction set. Eigen's templates are renamed
// into a namespace of the instruction set's own: compiled here with wider vectors, they must
// never be linked in place of the portable build's copies of the same templates
// (test/gemm_symbols.sh).
#define PITRAIN_JOIN2(a, b) a##b
#define PITRAIN_JOIN(a, b) PITRAIN_JOIN2(a, b)
#define Eigen PITRAIN_JOIN(pitrain_eigen_, PITRAIN_GEMM_ISA)
#include "gemm_eigen.h"
#include "gemm_unpacked.h"

namespace pitrain {

void PITRAIN_JOIN(gemm_, PITRAIN_GEMM_ISA)(bool trans_a, bool trans_b, int m, int n, int k,
                                           const float* a, int lda, const float* b, int ldb,
                                           float* c, int ldc, const float* add_alpha) {
  eigen_gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, add_alpha);
}

// AVX-512: 32 registers of 16 floats; AVX2: 16 of 8.
void PITRAIN_JOIN(gemm_unpacked_, PITRAIN_GEMM_ISA)(int m, int n, int k, const float* a,
                                                    int64_t a_row, int64_t a_col, const float* b,
                                                    int64_t ldb, float* c, int64_t ldc) {
#ifdef __AVX512F__
  UnpackedGemm<float __attribute__((vector_size(64))), 32>::run(m, n, k, a, a_row, a_col, b, ldb, c,
                                                                ldc);
#else
  UnpackedGemm<float __attribute__((vector_size(32))), 16>::run(m, n, k, a, a_row, a_col, b, ldb, c,
                                                                ldc);
#endif
}

}  // namespace pitrain
