// Matrix products. Every GEMM in pitrain goes through gemm(): with -Dblas=openblas (the default)
// Eigen's kernels built for AVX-512 or AVX2 on x86-64 CPUs that have them, else OpenBLAS'
// cblas_sgemm (ARM, older x86-64); with -Dblas=eigen, Eigen's own kernels in the build's
// instruction set. Winograd's small per-position products and a narrow Dense's (few units) go
// through gemm_unpacked(), ours.
#pragma once
#include <Eigen/Core>
#include <cstdint>
#include <string>
#include <vector>

namespace pitrain {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixView = Eigen::Map<RowMatrix>;
using ConstMatrixView = Eigen::Map<const RowMatrix>;

// Row-major C (m, n) = op(A) op(B), op(A) (m, k), op(B) (k, n); op transposes when its flag is
// set. C is overwritten, so it needs no zeroing pass.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b,
          float* c);
// C += alpha op(A) op(B), C as it is (a residual less a projection, without a pass of its own).
void gemm_add(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
              const float* b, float* c);
// gemm() on blocks of larger row-major matrices: lda, ldb and ldc are the row strides of A, B
// and C as stored (A is stored (k, m) when transposed).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b,
          int ldb, float* c, int ldc);
// C (m, n) = A (m, k) B (k, n) with nothing packed, for products too small for packing to pay
// (Winograd's per-position matrices, a narrow Dense's): A's element (i, p) at a[i * a_row + p *
// a_col], so A may be read transposed; B and C row-major with row strides ldb and ldc. In AVX-512
// or AVX2 where gemm() runs Eigen's kernels built for them, else in 4-float vectors (SSE2, NEON;
// gemm_unpacked.h).
void gemm_unpacked(int m, int n, int k, const float* a, int64_t a_row, int64_t a_col,
                   const float* b, int64_t ldb, float* c, int64_t ldc);

// Threads of each GEMM call (OpenBLAS', or Eigen's OpenMP with -Dblas=eigen; the AVX-512 and
// AVX2 kernels always run on the calling thread), and which GEMM this build uses.
void set_gemm_threads(int threads);
std::string gemm_backend();
// The GEMMs of this build that this CPU runs, fastest first, and a choice among them (tests and
// benchmarks; throws std::invalid_argument for another name).
std::vector<std::string> gemm_backends();
void use_gemm_backend(const std::string& name);

}  // namespace pitrain
