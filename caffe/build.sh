#!/usr/bin/env bash
# Build Caffe from source with this project's patch series; the one entry point
# (`make caffe`) that everything else uses.
#
#   CAFFE_GPU=auto|1|0   auto (default): CUDA + cuDNN when nvcc and cuDNN are found
#   CAFFE_CUDA_ARCH      GPU architectures for the GPU build (default "75 80 86 89 90")
#   CAFFE_SOURCE         a Caffe tarball or checkout to use instead of Debian's
#   CAFFE_CACHE          where builds are kept (default ~/.cache/imgstore-caffe)
#   CAFFE_JOBS           parallel compile jobs (default: all cores)
#   CAFFE_CMAKE_ARGS     extra CMake options (part of the cache key)
#   CAFFE_LINK=0         build (or find) it, but leave .build/caffe pointing where it was
#
#   caffe/build.sh --status      print the cache key and whether it is built; build nothing
#   caffe/build.sh --print-dir   print the build's folder in the cache; install or fetch nothing
#
# A build is keyed by the hash of source + patches + options; an unchanged key
# reuses the finished build and compiles nothing. The result is linked at
# .build/caffe (install prefix: bin/, lib/, python/) and .build/caffe-build (build tree,
# with Caffe's GoogleTest binary once `make caffe-gtest` has built it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
source "$root/scripts/defaults.sh"
cache=$IMGSTORE_CACHE
venv=${VENV:-$root/.venv}
jobs=${CAFFE_JOBS:-$(nproc)}

mode=build
case "${1:-}" in --status) mode=status ;; --print-dir) mode=print ;; esac
if [ $mode = print ]; then  # side-effect free: what is there, or a clear no
  [ -x "$venv/bin/python" ] || { echo "no venv at $venv: run make venv" >&2; exit 1; }
  source=$(CAFFE_FETCH=0 "$here/fetch_source.sh")
else
  [ $mode = status ] || "$root/scripts/apt_install.sh" "$here/apt-packages.txt"
  "$root/scripts/venv.sh"
  source=$("$here/fetch_source.sh")
fi
mkdir -p "$cache"

# --- GPU or not -------------------------------------------------------------
find_cudnn() {  # prints "INCLUDE_DIR LIBRARY" of an installed cuDNN, if any
  local inc lib
  for inc in "${CUDNN_ROOT:+$CUDNN_ROOT/include}" /usr/include /usr/include/x86_64-linux-gnu \
             /usr/local/cuda/include; do
    [ -n "$inc" ] && [ -f "$inc/cudnn.h" ] || continue
    for lib in "${CUDNN_ROOT:+$CUDNN_ROOT/lib}" "${CUDNN_ROOT:+$CUDNN_ROOT/lib64}" \
               /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64; do
      [ -n "$lib" ] && [ -e "$lib/libcudnn.so" ] && { echo "$inc $lib/libcudnn.so"; return; }
    done
  done
  return 0
}
fetch_cuda_wheels() {  # cuBLAS, cuRAND, cuDNN from PyPI, for a machine whose CUDA lacks them
  [ -f "$cache/nvidia/.complete" ] && return
  echo "Fetching cuBLAS, cuRAND and cuDNN 9 wheels into $cache/nvidia ..."
  rm -rf "$cache/nvidia"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$cache/nvidia" \
    "nvidia-cublas==${CUBLAS_VERSION:-13.*}" "nvidia-curand==${CURAND_VERSION:-10.*}" \
    "nvidia-cudnn-cu13==${CUDNN_VERSION:-9.*}"
  # the wheels ship only versioned sonames; the linker wants the plain names
  for lib in "$cache"/nvidia/nvidia/*/lib/lib*.so.*[0-9]; do
    plain=${lib%%.so.*}.so; [ -e "$plain" ] || ln -s "$(basename "$lib")" "$plain"
  done
  touch "$cache/nvidia/.complete"
}

gpu=${CAFFE_GPU:-auto}
find_cuda_root() {  # the toolkit: where bin/nvcc and include/cuda_runtime.h both are
  local nvcc d
  nvcc=$(command -v nvcc 2>/dev/null || true)
  # nvcc on the PATH may be a symlink or a wrapper script (/usr/local/bin/nvcc -> exec .../cuda-13.0/bin/nvcc)
  for d in "${CUDA_ROOT:-}" "$( [ -n "$nvcc" ] && dirname "$(dirname "$(readlink -f "$nvcc")")")" \
           /usr/local/cuda /usr/local/cuda-*; do
    [ -n "$d" ] && [ -x "$d/bin/nvcc" ] && [ -f "$d/include/cuda_runtime.h" ] && { echo "$d"; return; }
  done
  echo /usr/local/cuda
}
cuda_root=$(find_cuda_root)
if [ "$gpu" = auto ]; then
  gpu=0
  [ -x "$cuda_root/bin/nvcc" ] && [ -n "$(find_cudnn)" ] && gpu=1
fi
cmake_opts=(-DCMAKE_BUILD_TYPE=Release -DBLAS=Open -Dpython_version=3 -DBUILD_python=ON
            -DBUILD_python_layer=OFF -DBUILD_docs=OFF -DBUILD_matlab=OFF -DUSE_NCCL=OFF
            -DUSE_LMDB=ON -DUSE_LEVELDB=ON -DUSE_OPENCV=ON -DUSE_HDF5=ON -DUSE_REDIS=ON)
extra_rpath=""
if [ "$gpu" = 1 ]; then
  [ -x "$cuda_root/bin/nvcc" ] || { echo "CAFFE_GPU=1 but nvcc was not found (set CUDA_ROOT)" >&2; exit 1; }
  read -r cudnn_inc cudnn_lib <<< "$(find_cudnn)" || true
  blas_dir=$cuda_root
  if [ -z "${cudnn_lib:-}" ] || ! ls "$cuda_root"/lib64/libcublas.so* >/dev/null 2>&1; then
    fetch_cuda_wheels
    if [ -z "${cudnn_lib:-}" ]; then
      cudnn_inc=$cache/nvidia/nvidia/cudnn/include cudnn_lib=$cache/nvidia/nvidia/cudnn/lib/libcudnn.so
    fi
    ls "$cuda_root"/lib64/libcublas.so* >/dev/null 2>&1 || blas_dir=$cache/nvidia/nvidia/cu13
  fi
  arch=${CAFFE_CUDA_ARCH:-75 80 86 89 90}
  cmake_opts+=(-DCPU_ONLY=OFF -DUSE_CUDNN=ON "-DCUDA_TOOLKIT_ROOT_DIR=$cuda_root"
               -DCUDA_ARCH_NAME=Manual "-DCUDA_ARCH_BIN=$arch" "-DCUDA_ARCH_PTX=${arch##* }"
               "-DCUDNN_INCLUDE=$cudnn_inc" "-DCUDNN_LIBRARY=$cudnn_lib")
  if [ "$blas_dir" != "$cuda_root" ]; then
    # FindCUDA resets its library variables on first configure, so point the search paths instead
    cmake_opts+=("-DCMAKE_LIBRARY_PATH=$blas_dir/lib" "-DCMAKE_CXX_FLAGS=-isystem $blas_dir/include"
                 "-DCUDA_NVCC_FLAGS=-isystem;$blas_dir/include")
  fi
  extra_rpath=";$(dirname "$cudnn_lib");$blas_dir/lib;$cuda_root/lib64"
else
  cmake_opts+=(-DCPU_ONLY=ON -DUSE_CUDNN=OFF)
fi
# shellcheck disable=SC2206
cmake_opts+=(${CAFFE_CMAKE_ARGS:-})

# --- the cache key: source + patches + options + the Python pycaffe compiles against
source_id=$(if [ -f "$source" ]; then sha256sum < "$source"; else
            (cd "$source" && find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum; fi)
pyinfo=$("$venv/bin/python" -c 'import sys, numpy; print(sys.version, numpy.__version__)')
key=$( { echo "$source_id"; cat "$here"/patches/*.patch; echo "${cmake_opts[*]}"; echo "$pyinfo"; } |
       sha256sum | cut -c1-16)
dir=$cache/build-$key
mkdir -p "$root/.build"
link_result() {
  [ "${CAFFE_LINK:-1}" = 1 ] || return 0
  ln -sfn "$dir/install" "$root/.build/caffe"
  ln -sfn "$dir/build" "$root/.build/caffe-build"
  # make `import caffe` work in the venv
  local purelib
  purelib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '%s\n' "$root/.build/caffe/python" > "$purelib/caffe.pth"
  echo "$key" > "$root/.build/caffe.key"
}

[ $mode = print ] && { echo "$dir"; exit 0; }
if [ $mode = status ]; then
  echo "key $key $( [ -f "$dir/.complete" ] && echo built || echo "not built") $dir"
  exit 0
fi

exec 9>"$cache/build.lock"
flock 9
if [ -f "$dir/.complete" ]; then
  echo "Caffe is up to date (build $key, $( [ "$gpu" = 1 ] && echo GPU || echo CPU-only))."
  link_result
  exit 0
fi

echo "Building Caffe (build $key, $( [ "$gpu" = 1 ] && echo "GPU, archs: $arch" || echo CPU-only), $jobs jobs) in $dir"
rm -rf "$dir"  # never trust a half-finished build
mkdir -p "$dir/src" "$dir/build"
if [ -f "$source" ]; then tar -xzf "$source" -C "$dir/src"; else cp -a "$source/." "$dir/src/"; fi
for p in "$here"/patches/*.patch; do
  echo "  patch $(basename "$p"): $(head -1 "$p")"
  patch -d "$dir/src" -p1 --forward --quiet < "$p"
done

start=$(date +%s)
(cd "$dir/build" && cmake "$dir/src" "${cmake_opts[@]}" \
   "-DCMAKE_INSTALL_PREFIX=$dir/install" "-DCMAKE_INSTALL_RPATH=$dir/install/lib$extra_rpath" \
   "-DPYTHON_EXECUTABLE=$venv/bin/python" > "$dir/cmake.log" 2>&1) ||
  { tail -40 "$dir/cmake.log"; echo "cmake failed; full log: $dir/cmake.log" >&2; exit 1; }
if [ "$gpu" = 1 ] && ! grep -q "CUDA detected" "$dir/cmake.log" || { [ "$gpu" = 1 ] && ! grep -q "Found cuDNN" "$dir/cmake.log"; }; then
  grep -i -m5 "cuda\|cudnn" "$dir/cmake.log" >&2
  echo "GPU build asked for, but CMake did not find CUDA and cuDNN (toolkit: $cuda_root); see $dir/cmake.log" >&2
  exit 1
fi
(cd "$dir/build" && make -j"$jobs" all > "$dir/make.log" 2>&1 && make install >> "$dir/make.log" 2>&1) ||
  { grep -B2 -A8 -m5 'error' "$dir/make.log" | head -60; echo "build failed; full log: $dir/make.log" >&2; exit 1; }
echo "$((($(date +%s) - start)))" > "$dir/build-seconds"
printf '%s\n' "${cmake_opts[@]}" > "$dir/options"
touch "$dir/.complete"
echo "Caffe built in $(cat "$dir/build-seconds")s."
link_result
