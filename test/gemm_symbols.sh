#!/usr/bin/env bash
# The AVX-512 GEMM's library (src/nn/gemm_avx512.cpp) may define no global or weak symbol that
# the portable build could define too: a template or inline function compiled for AVX-512 that
# the linker kept for the whole program would crash CPUs without AVX-512. Only
# pitrain::gemm_avx512 and the renamed Eigen namespace may be there.
# usage: test/gemm_symbols.sh LIBRARY
set -euo pipefail
# Global and weak symbols, mangled: a name that mentions the renamed namespace (a template of it,
# or one instantiated with its types) cannot be the portable build's. nm on its own, so that its
# failure is not taken for an empty list.
globals=$(nm --defined-only "$1" | awk '$2 ~ /^[A-Zu]$/ { print $3 }') || { echo "FAIL: nm cannot read $1"; exit 1; }
# grep -v finds nothing when all is well: its status 1 is no failure.
shared=$(grep -v -e 'pitrain_eigen_avx512' -e '^DW\.ref\.__gxx_personality_v0$' <<<"$globals" | c++filt |
  grep -v '^pitrain::gemm_avx512(' || true)
if [ -n "$shared" ]; then
  echo "FAIL: $1 defines symbols the portable build may define too:"
  echo "$shared" | head -20
  exit 1
fi
if ! c++filt <<<"$globals" | grep -q '^pitrain::gemm_avx512('; then
  echo "FAIL: $1 defines no pitrain::gemm_avx512: not the AVX-512 GEMM's library (src/nn/gemm_avx512.cpp)?"
  exit 1
fi
echo "ok: $1 defines pitrain::gemm_avx512 and $(grep -c pitrain_eigen_avx512 <<<"$globals") global symbols of the renamed namespace"
