#!/usr/bin/env bash
# Print the folder of Boost.Python's sources (libs/python/src) of the Boost version installed
# here, from Debian's own source package with Debian's Python patches applied, fetched once.
set -euo pipefail
source "$(dirname "$0")/../scripts/defaults.sh"
cache=$IMGSTORE_CACHE
version=$(dpkg-query -W -f='${source:Version}' libboost-python1.74-dev 2>/dev/null || true)
[ -n "$version" ] || { echo "libboost-python1.74-dev is not installed (make caffe installs it)" >&2; exit 1; }
dir=$cache/boost-python-src-$version
if [ ! -f "$dir/.complete" ]; then
  echo "Fetching Boost $version sources (Boost.Python only) from Debian ..." >&2
  rm -rf "$dir"
  "$(dirname "$0")/debian_source.sh" "boost1.74=$version" "$dir/fetch"
  tar -xJf "$dir"/fetch/boost1.74_*.orig.tar.xz -C "$dir/fetch" --wildcards '*/libs/python/src/*'
  tar -xJf "$dir"/fetch/boost1.74_*.debian.tar.xz -C "$dir/fetch"
  top=$(ls -d "$dir"/fetch/boost*/ | head -1)
  while read -r p; do  # Debian's patches that touch Boost.Python's sources
    case $p in ''|'#'*) continue ;; esac
    if grep -q 'libs/python/src' "$dir/fetch/debian/patches/$p"; then
      patch -d "$top" -p1 --forward -s < "$dir/fetch/debian/patches/$p" >/dev/null || true
    fi
  done < "$dir/fetch/debian/patches/series"
  mv "$top/libs/python/src" "$dir/src"
  rm -rf "$dir/fetch"
  touch "$dir/.complete"
fi
echo "$dir/src"
