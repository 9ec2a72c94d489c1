#!/usr/bin/env bash
# Install CUDA 13, cuBLAS, cuRAND and cuDNN from PyPI's nvidia-* wheels (docker/cuda-wheels.txt)
# as one ordinary toolkit folder, as NVIDIA's devel image has it: PREFIX/bin/nvcc, include/,
# lib/ (lib64 -> lib), nvvm/, and /usr/local/cuda -> PREFIX, where caffe/build.sh looks. pip follows /etc/pip.conf, so a
# wheelhouse (docker/wheels) works without a registry.
#   docker/cuda_from_wheels.sh [PREFIX]     default /usr/local/cuda-13.0
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${1:-/usr/local/cuda-13.0}
pip=${PIP:-$here/../.venv/bin/pip}
[ -x "$prefix/bin/nvcc" ] && { echo "CUDA toolkit at $prefix: present"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "Installing the CUDA toolkit from wheels into $prefix"
"$pip" install -q --no-deps --target "$tmp" -r "$here/cuda-wheels.txt"
[ -x "$tmp/nvidia/cu13/bin/nvcc" ] || { echo "the wheels held no nvidia/cu13/bin/nvcc" >&2; exit 1; }
mkdir -p "$(dirname "$prefix")"
mv "$tmp/nvidia/cu13" "$prefix.partial"
for part in "$tmp"/nvidia/*/; do  # cuDNN has a folder of its own: merge it in
  for sub in include lib; do if [ -d "$part$sub" ]; then cp -a "$part$sub/." "$prefix.partial/$sub/"; fi; done
done
cd "$prefix.partial"
ln -s lib lib64
mkdir -p targets/x86_64-linux
ln -s ../../include targets/x86_64-linux/include
ln -s ../../lib targets/x86_64-linux/lib
# the wheels ship only versioned sonames; the linker wants the plain names
for lib in lib/lib*.so.*[0-9]; do
  plain=${lib%%.so.*}.so; [ -e "$plain" ] || ln -s "$(basename "$lib")" "$plain"
done
cd - >/dev/null
mv "$prefix.partial" "$prefix"
ln -sfn "$prefix" /usr/local/cuda
"$prefix/bin/nvcc" --version | tail -1
