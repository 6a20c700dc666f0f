// C (m, n) = A (m, k) B (k, n) straight from where A and B lie, in the vector width of the file
// that includes this (gemm.cpp: the build's; gemm_isa.cpp: AVX-512 or AVX2). A block of R rows
// by NV vectors of C stays in registers while k runs: each step loads NV vectors of B's row and
// multiplies R values of A's column, each broadcast, into them. Nothing is packed: Eigen's GEMM
// packs both operands every call, a large part of the GEMMs' time in a one-thread `cnn` step,
// mostly Winograd's per-position products of a share's few rows (bench/compute.sh). Internal
// linkage, so that each includer keeps its own copy.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

namespace pitrain {
namespace {

// V: a GCC vector of floats; kRegisters: the vector registers (32 for AVX-512 and AArch64's
// NEON, 16 for AVX2, SSE and 32-bit NEON). A block holds three quarters of them as
// accumulators, as many rows as fit of up to an eighth of them each (at most kMaxRows), and a
// row of B.
template <class V, int kRegisters>
struct UnpackedGemm {
  static constexpr int kAccumulators = kRegisters * 3 / 4, kVectors = kRegisters / 8;
  static constexpr int kWidth = int(sizeof(V) / sizeof(float)), kMaxRows = 12;
  static constexpr int rows(int nv) { return std::min(kMaxRows, kAccumulators / nv); }

  static V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  // The R x NV block of C at c.
  template <int R, int NV>
  static void block(int k, const float* a, int64_t a_row, int64_t a_col, const float* b,
                    int64_t ldb, float* c, int64_t ldc) {
    V acc[R][NV];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < NV; ++j) acc[r][j] = V{};
    for (int p = 0; p < k; ++p, a += a_col, b += ldb) {
      V bv[NV];
      for (int j = 0; j < NV; ++j) bv[j] = load(b + j * kWidth);
      for (int r = 0; r < R; ++r) {
        const float ar = a[r * a_row];
        for (int j = 0; j < NV; ++j) acc[r][j] += ar * bv[j];
      }
    }
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < NV; ++j) std::memcpy(c + r * ldc + j * kWidth, &acc[r][j], sizeof(V));
  }

  // blocks[(nv - 1) * kMaxRows + r - 1]: the block of r rows and nv vectors, where they fit.
  using Block = void (*)(int, const float*, int64_t, int64_t, const float*, int64_t, float*,
                         int64_t);
  template <int I>
  static constexpr Block entry() {
    constexpr int r = I % kMaxRows + 1, nv = I / kMaxRows + 1;
    if constexpr (r <= rows(nv))
      return &block<r, nv>;
    else
      return nullptr;
  }
  template <size_t... I>
  static constexpr std::array<Block, sizeof...(I)> table(std::index_sequence<I...>) {
    return {entry<int(I)>()...};
  }

  static void run(int m, int n, int k, const float* a, int64_t a_row, int64_t a_col, const float* b,
                  int64_t ldb, float* c, int64_t ldc) {
    static constexpr auto blocks = table(std::make_index_sequence<kVectors * kMaxRows>());
    int j = 0;
    for (int nv; (nv = std::min(kVectors, (n - j) / kWidth)) > 0; j += nv * kWidth)
      for (int i = 0; i < m; i += rows(nv)) {
        const int r = std::min(rows(nv), m - i);
        blocks[size_t((nv - 1) * kMaxRows + r - 1)](k, a + i * a_row, a_row, a_col, b + j, ldb,
                                                    c + i * ldc + j, ldc);
      }
    for (int i = 0; i < m; ++i)  // the columns past the last whole vector
      for (int jj = j; jj < n; ++jj) {
        float sum = 0;
        for (int p = 0; p < k; ++p) sum += a[i * a_row + p * a_col] * b[p * ldb + jj];
        c[i * ldc + jj] = sum;
      }
  }
};

}  // namespace
}  // namespace pitrain
