// Row-major Eigen views over raw float buffers: every GEMM in pitrain goes through these, so
// EIGEN_USE_BLAS (meson -Dblas=openblas) hands them to OpenBLAS' sgemm.
#pragma once
#include <Eigen/Core>

namespace pitrain {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixView = Eigen::Map<RowMatrix>;
using ConstMatrixView = Eigen::Map<const RowMatrix>;
using VectorView = Eigen::Map<Eigen::RowVectorXf>;
using ConstVectorView = Eigen::Map<const Eigen::RowVectorXf>;

}  // namespace pitrain
