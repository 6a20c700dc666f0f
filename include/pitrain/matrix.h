// Matrix products. Every GEMM in pitrain goes through gemm(): OpenBLAS' cblas_sgemm when built
// with -Dblas=openblas (the default), Eigen's own kernels with -Dblas=eigen.
#pragma once
#include <Eigen/Core>
#include <string>

namespace pitrain {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixView = Eigen::Map<RowMatrix>;
using ConstMatrixView = Eigen::Map<const RowMatrix>;
using VectorView = Eigen::Map<Eigen::RowVectorXf>;
using ConstVectorView = Eigen::Map<const Eigen::RowVectorXf>;

enum class Accumulate { no, yes };

// Row-major C (m, n) = op(A) op(B), or C += op(A) op(B) with Accumulate::yes; op(A) is (m, k),
// op(B) is (k, n), and op transposes when its flag is set. Overwriting needs no zeroing pass.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b, float* c,
          Accumulate acc = Accumulate::no);

// Threads of the GEMMs (OpenBLAS', or Eigen's OpenMP), and which GEMM this build uses.
void set_compute_threads(int threads);
std::string gemm_backend();

}  // namespace pitrain
