#!/usr/bin/env bash
# Compile the cppmem driver against the project's Caffe (.build/caffe), when it or Caffe changed.
#   CAFFE_PREFIX=DIR CPPMEM_OUT=FILE   another Caffe install and output (device/bundle.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
prefix=${CAFFE_PREFIX:-$root/.build/caffe}
src=$root/experiments/cppmem/cppmem_train.cpp
out=${CPPMEM_OUT:-$root/.build/cppmem_train}
[ -e "$prefix/lib/libcaffe.so" ] || { echo "no Caffe build: run make caffe" >&2; exit 1; }
stamp=$( { sha256sum < "$src"; readlink -f "$prefix"; } | sha256sum | cut -c1-16)
[ -x "$out" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$stamp" ] && exit 0
# the build's compile definitions (CPU_ONLY, USE_CUDNN, ...) as Caffe exported them
defs=$(sed -n 's/.*INTERFACE_COMPILE_DEFINITIONS "\(.*\)"/\1/p' "$prefix"/share/Caffe/CaffeTargets.cmake |
       head -1 | tr ';' '\n' | sed 's/^/-D/' | tr '\n' ' ')
cuda_inc=""
if [[ " $defs " != *" -DCPU_ONLY "* ]]; then  # CUDA, cuBLAS and cuDNN headers, where the build found them
  opts=$(readlink -f "$prefix")/../options
  cuda_inc=$(sed -n 's/^-DCUDA_TOOLKIT_ROOT_DIR=\(.*\)/-I\1\/include/p; s/^-DCUDNN_INCLUDE=/-I/p;
                     s/^-DCMAKE_CXX_FLAGS=-isystem /-I/p' "$opts" | tr '\n' ' ')
fi
echo "Compiling cppmem_train ($defs)"
g++ -O2 -std=c++17 $defs $cuda_inc -I"$prefix/include" "$src" -o "$out.tmp" \
  -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lcaffe -lglog -lgflags -lprotobuf -lboost_system
mv "$out.tmp" "$out"
echo "$stamp" > "$out.key"
