#!/usr/bin/env bash
# make gpu-bundle: everything a GPU machine without a package registry needs to run this
# project's experiments, in one folder (.device-bundle/, ~30 MiB) to send along with a call.
#
#   device/bundle.sh --python-include FILE.tgz   (written by device/probe.sh on that machine)
#
# What goes in, and why:
#   caffe/          the GPU build of Caffe (CAFFE_GPU=1, CAFFE_CUDA_ARCH default 90 = H100/H200):
#                   bin/, lib/libcaffe.so, python/caffe with _caffe.so built for the machine's Python
#   cppmem_train    the cppmem driver, linked against that build
#   cpu_probe       the host's per-core image data path speed (monitor/cpu_probe.cpp), likewise
#   lib/            the shared libraries that machine lacks: glog, gflags, Boost (thread,
#                   filesystem, python for its Python), LMDB, LevelDB, snappy, libunwind, HDF5,
#                   libjpeg, and a minimal OpenCV (device/opencv_minimal.sh)
#   wheels/         lmdb and plyvel for its Python
# It relies on the machine for: the NVIDIA driver, CUDA 13 (cudart, cuBLAS, cuRAND), cuDNN 9,
# OpenBLAS, protobuf 3.21 (libprotobuf.so.32), libpng16, zlib, libcurl, Python with numpy,
# protobuf, h5py, psutil, pynvml, tqdm, opencv-python, scikit-image. device/env.sh checks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/.device-bundle
source "$(dirname "$0")/../scripts/defaults.sh"
cache=$IMGSTORE_CACHE
py_include=""
while [ $# -gt 0 ]; do
  case $1 in
    --python-include) py_include=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$py_include" ] && [ -f "$py_include" ] || { echo "needs --python-include FILE.tgz (make gpu-bundle PY_INCLUDE=...): run device/probe.sh on the GPU machine first; it writes python-include.tgz" >&2; exit 2; }
py_include=$(realpath "$py_include")

# --- 1. the GPU build, leaving this machine's .build/caffe as it was
export CAFFE_CUDA_ARCH=${CAFFE_CUDA_ARCH:-90}
CAFFE_GPU=1 CAFFE_LINK=0 "$root/caffe/build.sh"
build=$(CAFFE_GPU=1 "$root/caffe/build.sh" --print-dir)
key=$(basename "$build" | sed 's/^build-//')
opencv=$("$root/device/opencv_minimal.sh")

# --- 2. Boost.Python and pycaffe for the machine's Python, from its headers
work=$cache/device-python-$(sha256sum < "$py_include" | cut -c1-12)
mkdir -p "$work"
tar -xzf "$py_include" -C "$work"
if grep -q '^# *include <.*/python3\.[0-9]*/pyconfig\.h>' "$work/include/pyconfig.h"; then
  echo "$py_include holds Debian's multiarch pyconfig.h wrapper, not the real one: re-run device/probe.sh" >&2
  rm -rf "$work"; exit 2
fi
pyver=$(cat "$work/include/VERSION"); pytag=${pyver/./}
boost_lib=$work/libboost_python$pytag.so.1.74.0
if [ ! -f "$boost_lib" ]; then
  echo "Building Boost.Python 1.74 for Python $pyver ..."
  boost_src=$("$root/device/boost_python_source.sh")
  mkdir -p "$work/bp"
  (cd "$boost_src" && ls -- *.cpp object/*.cpp converter/*.cpp) |
    xargs -P"$(nproc)" -I{} sh -c 'g++ -O2 -fPIC -std=c++14 -DBOOST_PYTHON_SOURCE -DBOOST_PYTHON_DYNAMIC_LIB \
      -DNDEBUG -I"$1/include" -c "$2/{}" -o "$1/bp/$(echo {} | tr / _).o"' _ "$work" "$boost_src"
  g++ -shared -o "$boost_lib.tmp" -Wl,-soname,"$(basename "$boost_lib")" "$work"/bp/*.o
  mv "$boost_lib.tmp" "$boost_lib"
fi
pycaffe=$work/_caffe-$key.so
if [ ! -f "$pycaffe" ]; then
  echo "Compiling pycaffe (_caffe.so) for Python $pyver ..."
  defs=$(sed -n 's/^CXX_DEFINES = //p' "$build/build/python/CMakeFiles/pycaffe.dir/flags.make")
  incs=$(sed -n 's/^CXX_INCLUDES = //p' "$build/build/python/CMakeFiles/pycaffe.dir/flags.make" |
         tr ' ' '\n' | grep -v '/python3\.[0-9]*$' | tr '\n' ' ')
  flags=$(sed -n 's/^CXX_FLAGS = //p' "$build/build/python/CMakeFiles/pycaffe.dir/flags.make")
  # shellcheck disable=SC2086
  g++ $defs $flags -I"$work/include" $incs -shared "$build/src/python/caffe/_caffe.cpp" -o "$pycaffe.tmp" \
    -L"$build/install/lib" -lcaffe "$boost_lib" -lboost_system -lglog -lgflags -lprotobuf
  mv "$pycaffe.tmp" "$pycaffe"
fi

# --- 3. assemble
rm -rf "$out.partial"; mkdir -p "$out.partial"/{caffe,lib,wheels}
cp -a "$build/install/bin" "$build/install/lib" "$out.partial/caffe/"
rm -f "$out.partial"/caffe/lib/*.a
cp -a "$build/install/python" "$out.partial/caffe/"
find "$out.partial/caffe/python" -name '__pycache__' -prune -exec rm -rf {} +
cp "$pycaffe" "$out.partial/caffe/python/caffe/_caffe.so"
CAFFE_PREFIX=$build/install TOOLS_OUT=$out.partial "$root/caffe/build_tools.sh"
rm -f "$out.partial"/*.key
cp -L "$opencv"/lib/libopencv_{core,imgproc,imgcodecs}.so.406 "$out.partial/lib/"
cp "$boost_lib" "$out.partial/lib/"
for so in libglog.so.1 libgflags.so.2.2 libboost_thread.so.1.74.0 libboost_filesystem.so.1.74.0 \
          libboost_system.so.1.74.0 libboost_atomic.so.1.74.0 liblmdb.so.0 libleveldb.so.1d \
          libsnappy.so.1 libunwind.so.8 libjpeg.so.62 libhdf5_serial.so.103 libhdf5_serial_hl.so.100 \
          libhiredis.so.0.14; do
  cp -L "/usr/lib/x86_64-linux-gnu/$so" "$out.partial/lib/"
done
strip --strip-unneeded "$out.partial"/lib/*.so* "$out.partial"/caffe/lib/*.so* 2>/dev/null || true
"$root/.venv/bin/pip" download -q --no-deps --only-binary=:all: --python-version "$pyver" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$out.partial/wheels" \
  "$(grep '^lmdb==' "$root/requirements.txt")" "$(grep '^plyvel==' "$root/requirements.txt")"
cp "$build/options" "$out.partial/options"  # run.py reads it to tell a CUDA build
echo "$key" > "$out.partial/caffe.key"
printf '{"caffe_build": "%s", "cuda_arch": "%s", "python": "%s", "made": "%s", "sources": "%s"}\n' \
  "$key" "$CAFFE_CUDA_ARCH" "$pyver" "$(date -u +%FT%TZ)" "$("$root/device/sources_digest.sh")" > "$out.partial/BUNDLE.json"
rm -rf "$out"; mv "$out.partial" "$out"
echo "GPU bundle: $out ($(du -sh "$out" | cut -f1)); send it with the device tool's carry: [\".device-bundle\"]"
echo "on the machine:  source device/env.sh && python3 experiments/run.py mnist lmdb cold --gpu 0"
