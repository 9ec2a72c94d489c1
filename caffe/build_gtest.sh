#!/usr/bin/env bash
# Build Caffe's own GoogleTest binary (test.testbin) in the cached build tree of the
# current build (.build/caffe-build), once; then run it with any arguments given, e.g.
#   caffe/build_gtest.sh --gtest_filter='*DataLayer*'
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -f "$root/.build/caffe-build")
[ -d "$build" ] || { echo "no Caffe build yet: run make caffe" >&2; exit 1; }
bin=$build/test/test.testbin
if [ ! -x "$bin" ]; then
  exec 9>"$(dirname "$build")/../build.lock"
  flock 9
  if [ ! -x "$bin" ]; then
    echo "Building Caffe's GoogleTest suite in $build (one-off; ~5 min on 2 cores)..."
    make -C "$build" -j"${CAFFE_JOBS:-$(nproc)}" test.testbin > "$build/../gtest-build.log" 2>&1 ||
      { tail -30 "$build/../gtest-build.log"; exit 1; }
  fi
fi
[ $# -eq 0 ] && exit 0
# Caffe's tests read src/caffe/test/test_data/... relative to the source root, as `make runtest` runs them
cd "$(dirname "$build")/src" && exec "$bin" "$@"
