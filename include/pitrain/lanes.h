// Eight floats in GCC's and Clang's vector extension, for hot loops that the compiler's own
// vectoriser left scalar (the direct convolution, max pooling), and how such loops read and
// write them in place. Compiled in each copy's instruction set (vector_copies.h).
#pragma once

namespace pitrain {

// One AVX2 register, two SSE2 or NEON ones.
using Lanes = float __attribute__((vector_size(32)));

// lanes_at<L>(p): the L at p, L being Lanes or float, read and written in place, unaligned: copied
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
inline const typename Unaligned<L>::type& lanes_at(const float* p) {
  return *reinterpret_cast<const typename Unaligned<L>::type*>(p);
}
template <class L>
inline typename Unaligned<L>::type& lanes_at(float* p) {
  return *reinterpret_cast<typename Unaligned<L>::type*>(p);
}

}  // namespace pitrain
