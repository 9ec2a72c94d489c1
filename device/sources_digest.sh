#!/usr/bin/env bash
# A digest of what the GPU bundle is compiled from (Caffe's recipe and patches, this project's C++
# programs): BUNDLE.json keeps it, and `gpu_calibrate.py --dry-run` tells a bundle older than the tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cat caffe/build.sh caffe/build_tools.sh caffe/patches/* experiments/cppmem/cppmem_train.cpp monitor/cpu_probe.cpp |
  sha256sum | cut -c1-16
