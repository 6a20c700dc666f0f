// Matrix products. Every GEMM in pitrain goes through gemm(): with -Dblas=openblas (the default)
// Eigen's kernels built for AVX-512 on x86-64 CPUs that have it, else OpenBLAS' cblas_sgemm;
// with -Dblas=eigen, Eigen's own kernels in the build's instruction set.
#pragma once
#include <Eigen/Core>
#include <string>

namespace pitrain {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixView = Eigen::Map<RowMatrix>;
using ConstMatrixView = Eigen::Map<const RowMatrix>;

// Row-major C (m, n) = op(A) op(B), op(A) (m, k), op(B) (k, n); op transposes when its flag is
// set. C is overwritten, so it needs no zeroing pass.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b, float* c);
// The same on blocks of larger row-major matrices: lda, ldb and ldc are the row strides of A, B
// and C as stored (A is stored (k, m) when transposed).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
          int ldc);

// Threads of each GEMM call (OpenBLAS', or Eigen's OpenMP), and which GEMM this build uses.
void set_gemm_threads(int threads);
std::string gemm_backend();

}  // namespace pitrain
