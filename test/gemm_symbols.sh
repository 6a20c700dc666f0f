#!/usr/bin/env bash
# A GEMM library built for one instruction set (src/nn/gemm_isa.cpp) may define no global or weak
# symbol that the portable build could define too: a template or inline function compiled for
# AVX-512 or AVX2 that the linker kept for the whole program would crash CPUs without them. Only
# pitrain::gemm_ISA, pitrain::gemm_unpacked_ISA and the namespace pitrain_eigen_ISA may be there,
# and no static initialiser.
# usage: test/gemm_symbols.sh LIBRARY ISA   (ISA: avx512 or avx2)
set -euo pipefail
lib=$1 isa=$2
# Global and weak symbols, mangled: a name that mentions the renamed namespace (a template of it,
# or one instantiated with its types) cannot be the portable build's. nm on its own, so that its
# failure is not taken for an empty list.
globals=$(nm --defined-only "$lib" | awk '$2 ~ /^[A-Zu]$/ { print $3 }') || { echo "FAIL: nm cannot read $lib"; exit 1; }
# grep -v finds nothing when all is well: its status 1 is no failure.
shared=$(grep -v -e "pitrain_eigen_$isa" -e '^DW\.ref\.__gxx_personality_v0$' <<<"$globals" | c++filt |
  grep -v -e "^pitrain::gemm_$isa(" -e "^pitrain::gemm_unpacked_$isa(" || true)
if [ -n "$shared" ]; then
  echo "FAIL: $lib defines symbols the portable build may define too:"
  echo "$shared" | head -20
  exit 1
fi
# Nor may it run code of its own at start-up, which every CPU would run: no static initialiser.
sections=$(readelf -S --wide "$lib") || { echo "FAIL: readelf cannot read $lib"; exit 1; }
if grep -q -e '\.init_array' -e '\.ctors' <<<"$sections"; then
  echo "FAIL: $lib has a static initialiser (.init_array or .ctors), which would run $isa code on every CPU"
  exit 1
fi
# Not `c++filt | grep -q`: grep leaving at the first match could end c++filt by SIGPIPE, which
# pipefail takes for a failure.
demangled=$(c++filt <<<"$globals")
if ! grep -q "^pitrain::gemm_$isa(" <<<"$demangled"; then
  echo "FAIL: $lib defines no pitrain::gemm_$isa: not the $isa GEMM's library (src/nn/gemm_isa.cpp)?"
  exit 1
fi
echo "ok: $lib defines pitrain::gemm_$isa and $(grep -c "pitrain_eigen_$isa" <<<"$globals") global symbols of the renamed namespace"
