#!/usr/bin/env bash
# Check that a rewritten patch series gives the same Caffe source as the one it replaces: the
# series in caffe/patches at git revision REV and the one there now are each applied to a fresh
# copy of Caffe's source, as build.sh applies them, and the two trees are compared.
#
#   caffe/series_diff.sh REV    prints "same tree" and exits 0, or the differences and exits 1
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
rev=${1:?usage: caffe/series_diff.sh REV (the git revision of the series to compare with)}
source=$(CAFFE_FETCH=0 "$here/fetch_source.sh")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/series-$rev" "$work/tree-$rev" "$work/tree-now"
git -C "$root" archive "$rev" caffe/patches | tar -x -C "$work/series-$rev" --strip-components=2

apply_series() {  # SERIES_DIR TREE_DIR
  if [ -f "$source" ]; then tar -xzf "$source" -C "$2"; else cp -a "$source/." "$2/"; fi
  for p in "$1"/*.patch; do
    patch -d "$2" -p1 --forward --quiet < "$p" || { echo "$(basename "$p") does not apply" >&2; exit 1; }
  done
}
apply_series "$work/series-$rev" "$work/tree-$rev"
apply_series "$here/patches" "$work/tree-now"
(cd "$work" && diff -r "tree-$rev" tree-now) || { echo "the trees differ (above)" >&2; exit 1; }
echo "same tree: caffe/patches at $rev ($(ls "$work/series-$rev" | wc -l) patches) and now ($(ls "$here"/patches/*.patch | wc -l) patches)"
