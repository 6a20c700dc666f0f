#include <atomic>
#include <stdexcept>

#include "pitrain/matrix.h"

#ifdef PITRAIN_OPENBLAS
#include <cblas.h>
#else
#include "gemm_eigen.h"
#endif
#include "gemm_unpacked.h"

namespace pitrain {

#ifdef PITRAIN_GEMM_ISA_KERNELS
// On x86-64 CPUs with AVX2 or AVX-512, Eigen's kernels built for them (gemm_isa.cpp) beat
// Debian's OpenBLAS on cnn's and mlp's shapes (OpenBLAS' kernels stop at AVX2 on AMD EPYC).
// Neither takes a lock, where OpenBLAS takes one global mutex twice a call, which two threads
// making cnn's hundreds of small GEMMs a step contend for, and clears or scales C in a pass of its
// own (bench/compute.sh; bench/RESULTS.md, Compute).
void gemm_avx512(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                 const float* b, int ldb, float* c, int ldc, const float* add_alpha);
void gemm_avx2(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
               const float* b, int ldb, float* c, int ldc, const float* add_alpha);
void gemm_unpacked_avx512(int m, int n, int k, const float* a, int64_t a_row, int64_t a_col,
                          const float* b, int64_t ldb, float* c, int64_t ldc);
void gemm_unpacked_avx2(int m, int n, int k, const float* a, int64_t a_row, int64_t a_col,
                        const float* b, int64_t ldb, float* c, int64_t ldc);
#endif

namespace {

#ifdef PITRAIN_OPENBLAS
void openblas_gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                   const float* b, int ldb, float* c, int ldc, const float* add_alpha) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, add_alpha ? *add_alpha : 1.0f, a, lda,
              b, ldb, add_alpha ? 1.0f : 0.0f, c, ldc);
}
#endif

// 4-float vectors, SSE2's and NEON's (the Pis'), in the build's instruction set.
void gemm_unpacked_portable(int m, int n, int k, const float* a, int64_t a_row, int64_t a_col,
                            const float* b, int64_t ldb, float* c, int64_t ldc) {
  using V = float __attribute__((vector_size(16)));
#ifdef __aarch64__
  constexpr int registers = 32;
#else
  constexpr int registers = 16;
#endif
  UnpackedGemm<V, registers>::run(m, n, k, a, a_row, a_col, b, ldb, c, ldc);
}

struct GemmKernel {
  const char* name;
  bool (*supported)();
  // C = op(A) op(B), or with add_alpha C += *add_alpha op(A) op(B)
  void (*run)(bool, bool, int, int, int, const float*, int, const float*, int, float*, int,
              const float* add_alpha);
  // gemm_unpacked
  void (*unpacked)(int, int, int, const float*, int64_t, int64_t, const float*, int64_t, float*,
                   int64_t);
};

// The build's kernels, fastest first: gemm() takes the first this CPU runs. The last runs on
// every CPU.
const GemmKernel kKernels[] = {
#ifdef PITRAIN_GEMM_ISA_KERNELS
    {"eigen-avx512",
     [] {
       return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
     },
     gemm_avx512, gemm_unpacked_avx512},
    {"eigen-avx2", [] { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); },
     gemm_avx2, gemm_unpacked_avx2},
#endif
#ifdef PITRAIN_OPENBLAS
    {"openblas", [] { return true; }, openblas_gemm, gemm_unpacked_portable},
#else
    {"eigen", [] { return true; }, eigen_gemm, gemm_unpacked_portable},
#endif
};

// Atomic: the pool's threads call gemm() while a test or benchmark may choose another kernel.
std::atomic<const GemmKernel*>& current_kernel() {
  static std::atomic<const GemmKernel*> kernel = [] {
#ifdef PITRAIN_GEMM_ISA_KERNELS
    __builtin_cpu_init();  // a gemm() from a constructor may run before libgcc's own call
#endif
    const GemmKernel* k = kKernels;
    while (!k->supported()) ++k;
    return k;
  }();
  return kernel;
}

// Whole row-major matrices: each stride is its matrix's width as stored.
void gemm_whole(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b,
                float* c, const float* add_alpha) {
  current_kernel()
      .load(std::memory_order_relaxed)
      ->run(trans_a, trans_b, m, n, k, a, trans_a ? m : k, b, trans_b ? k : n, c, n, add_alpha);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b,
          float* c) {
  gemm_whole(trans_a, trans_b, m, n, k, a, b, c, nullptr);
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b,
          int ldb, float* c, int ldc) {
  current_kernel()
      .load(std::memory_order_relaxed)
      ->run(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, nullptr);
}

void gemm_add(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
              const float* b, float* c) {
  gemm_whole(trans_a, trans_b, m, n, k, a, b, c, &alpha);
}

void gemm_unpacked(int m, int n, int k, const float* a, int64_t a_row, int64_t a_col,
                   const float* b, int64_t ldb, float* c, int64_t ldc) {
  current_kernel()
      .load(std::memory_order_relaxed)
      ->unpacked(m, n, k, a, a_row, a_col, b, ldb, c, ldc);
}

std::string gemm_backend() { return current_kernel().load()->name; }

std::vector<std::string> gemm_backends() {
  std::vector<std::string> names;
  for (const GemmKernel& k : kKernels)
    if (k.supported()) names.push_back(k.name);
  return names;
}

void use_gemm_backend(const std::string& name) {
  for (const GemmKernel& k : kKernels)
    if (k.supported() && name == k.name) {
      current_kernel().store(&k);
      return;
    }
  throw std::invalid_argument("gemm backend " + name + " is not in this build or not for this CPU");
}

void set_gemm_threads(int threads) {
  Eigen::setNbThreads(threads);
#ifdef PITRAIN_OPENBLAS
  // Only on a change: the call starts OpenBLAS' threads where a fork stopped them, and they spin.
  if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
#endif
}

}  // namespace pitrain
