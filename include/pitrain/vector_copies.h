// Hot loops that the compiler vectorises: on x86-64 also compiled for AVX2 and AVX-512, the copy
// that the CPU runs picked when the program loads (GCC's target_clones), since the portable
// build runs SSE2 only. Elsewhere (ARM's NEON is the baseline) one copy.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#if defined(__x86_64__)
// x86-64-v3 is AVX2 with FMA, v4 AVX-512.
#define PITRAIN_VECTOR_COPIES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("fp-contract=fast")))
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

namespace pitrain {

// Eight floats: one AVX2 register, two SSE2 or NEON ones. GCC's and Clang's vector extension,
// for loops that the compiler's own vectoriser left scalar.
using Lanes = float __attribute__((vector_size(32)));

// at<L>(p): the L at p, L being Lanes or float, read and written in place, unaligned: copied
// through memcpy, GCC moved Lanes in halves through the stack (store-forwarding stalls).
template <class L>
constexpr int kWidth = int(sizeof(L) / sizeof(float));
template <class L>
struct Unaligned {
  using type = float;
};
template <>
struct Unaligned<Lanes> {
  using type = float __attribute__((vector_size(32), aligned(4), may_alias));
};
template <class L>
inline const typename Unaligned<L>::type& at(const float* p) {
  return *reinterpret_cast<const typename Unaligned<L>::type*>(p);
}
template <class L>
inline typename Unaligned<L>::type& at(float* p) {
  return *reinterpret_cast<typename Unaligned<L>::type*>(p);
}

}  // namespace pitrain
