#!/usr/bin/env bash
# The AVX-512 GEMM's library (src/nn/gemm_avx512.cpp) may define no global or weak symbol that
# the portable build could define too: a template or inline function compiled for AVX-512 that
# the linker kept for the whole program would crash CPUs without AVX-512. Only
# pitrain::gemm_avx512 and the renamed Eigen namespace may be there.
# usage: test/gemm_symbols.sh LIBRARY
set -euo pipefail
# Global and weak symbols, mangled: a name that mentions the renamed namespace (a template of it,
# or one instantiated with its types) cannot be the portable build's.
shared=$(nm --defined-only "$1" | awk '$2 ~ /^[A-Zu]$/ { print $3 }' |
  grep -v -e 'pitrain_eigen_avx512' -e '^DW\.ref\.__gxx_personality_v0$' | c++filt |
  grep -v '^pitrain::gemm_avx512(' || true)
if [ -n "$shared" ]; then
  echo "FAIL: $1 defines symbols the portable build may define too:"
  echo "$shared" | head -20
  exit 1
fi
echo "ok: $1 defines pitrain::gemm_avx512 and $(nm --defined-only "$1" | grep -c pitrain_eigen_avx512) symbols of the renamed namespace"
