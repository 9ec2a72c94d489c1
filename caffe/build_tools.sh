#!/usr/bin/env bash
# Compile this project's C++ programs against the project's Caffe (.build/caffe), each when it
# or Caffe changed:
#   cppmem_train   experiments/cppmem/cppmem_train.cpp   the cppmem backend's driver
#   cpu_probe      monitor/cpu_probe.cpp                  one core's speed at Caffe's image data path
#                                                         (every record's environment.cpu_probe)
#   CAFFE_PREFIX=DIR TOOLS_OUT=DIR   another Caffe install and output folder (device/bundle.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${CAFFE_PREFIX:-$root/.build/caffe}
out_dir=${TOOLS_OUT:-$root/.build}
[ -e "$prefix/lib/libcaffe.so" ] || { echo "no Caffe build: run make caffe" >&2; exit 1; }
# the build's compile definitions (CPU_ONLY, USE_CUDNN, ...) as Caffe exported them
defs=$(sed -n 's/.*INTERFACE_COMPILE_DEFINITIONS "\(.*\)"/\1/p' "$prefix"/share/Caffe/CaffeTargets.cmake |
       head -1 | tr ';' '\n' | sed 's/^/-D/' | tr '\n' ' ')
cuda_inc=""
if [[ " $defs " != *" -DCPU_ONLY "* ]]; then  # CUDA, cuBLAS and cuDNN headers, where the build found them
  opts=$(readlink -f "$prefix")/../options
  cuda_inc=$(sed -n 's/^-DCUDA_TOOLKIT_ROOT_DIR=\(.*\)/-I\1\/include/p; s/^-DCUDNN_INCLUDE=/-I/p;
                     s/^-DCMAKE_CXX_FLAGS=-isystem /-I/p' "$opts" | tr '\n' ' ')
fi

build_tool() {  # NAME SOURCE EXTRA_OPTIONS...
  local name=$1 src=$root/$2 out=$out_dir/$1 stamp
  shift 2
  stamp=$( { sha256sum < "$src"; readlink -f "$prefix"; } | sha256sum | cut -c1-16)
  [ -x "$out" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$stamp" ] && return 0
  echo "Compiling $name ($defs)"
  # shellcheck disable=SC2086
  # a temp name of this process's own: two makes at once (make caffe beside make gpu-bundle) each
  # compile and rename their own copy, the last rename wins with the same program
  g++ -O2 -std=c++17 $defs $cuda_inc -I"$prefix/include" "$src" -o "$out.tmp.$$" \
    -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lcaffe -lglog -lgflags -lprotobuf -lboost_system "$@"
  mv "$out.tmp.$$" "$out"
  echo "$stamp" > "$out.key.$$" && mv "$out.key.$$" "$out.key"
}

mkdir -p "$out_dir"
build_tool cppmem_train experiments/cppmem/cppmem_train.cpp
build_tool cpu_probe monitor/cpu_probe.cpp -I/usr/include/opencv4 -lopencv_core -lopencv_imgcodecs
