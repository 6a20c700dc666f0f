// Hot loops that the compiler vectorises: on x86-64 also compiled for AVX2 and AVX-512, the copy
// that the CPU runs picked when the program loads (GCC's target_clones), since the portable
// build runs SSE2 only. Elsewhere (ARM's NEON is the baseline) one copy.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#if defined(__x86_64__)
// x86-64-v3 is AVX2 with FMA, v4 AVX-512.
#define PITRAIN_VECTOR_COPIES                                                  \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), \
                 optimize("fp-contract=fast")))
// Without contraction into FMA, so that every copy gives the same bits.
#define PITRAIN_VECTOR_COPIES_SAME_BITS \
  __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#else
#define PITRAIN_VECTOR_COPIES __attribute__((optimize("fp-contract=fast")))
#define PITRAIN_VECTOR_COPIES_SAME_BITS
#endif
#else
#define PITRAIN_VECTOR_COPIES
#define PITRAIN_VECTOR_COPIES_SAME_BITS
#endif

// A lambda inside such a function is a function of its own, which GCC may compile in the
// portable instruction set only: this keeps it inlined into each copy.
#define PITRAIN_INLINE_LAMBDA __attribute__((always_inline))
