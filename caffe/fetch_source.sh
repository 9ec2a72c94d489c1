#!/usr/bin/env bash
# Print the path of Caffe's source (a tarball or a checkout), fetching it first if needed.
#
# Default: the upstream tarball of Debian bullseye's `caffe` source package
# (BVLC master of 2018-08-21), fetched with apt-get source through a private apt
# configuration, so the system's apt sources are left alone. Its sha256 is checked.
# CAFFE_SOURCE=/path/to/tarball-or-checkout uses what the user already has instead.
set -euo pipefail

VERSION=1.0.0+git20180821.99bd997
TARBALL=caffe_${VERSION}.orig.tar.gz
SHA256=e0eb3f06794f7402c77b7dec8e8480273ee1a1bb192e9122b621a69d4147ad0c
source "$(dirname "$0")/../scripts/defaults.sh"
cache=$IMGSTORE_CACHE

if [ -n "${CAFFE_SOURCE:-}" ]; then
  [ -e "$CAFFE_SOURCE" ] || { echo "CAFFE_SOURCE=$CAFFE_SOURCE does not exist" >&2; exit 1; }
  if [ -f "$CAFFE_SOURCE" ] && [ "$(sha256sum < "$CAFFE_SOURCE" | cut -d' ' -f1)" != "$SHA256" ]; then
    echo "note: $CAFFE_SOURCE is not the tested tarball (sha256 differs); the patches may not apply" >&2
  fi
  realpath "$CAFFE_SOURCE"
  exit 0
fi

dest=$cache/src/$TARBALL
if [ ! -f "$dest" ]; then
  [ "${CAFFE_FETCH:-1}" = 1 ] || { echo "no Caffe source at $dest (make caffe fetches it)" >&2; exit 1; }
  mkdir -p "$cache/src"
  echo "Fetching Caffe $VERSION source from Debian bullseye (deb-src)..." >&2
  private_apt bullseye
  tmp=$(mktemp -d "$cache/src/fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  apt-get "${apt_opts[@]}" update >&2
  (cd "$tmp" && apt-get "${apt_opts[@]}" source --download-only "caffe=${VERSION}-8" >&2)
  mv "$tmp/$TARBALL" "$dest.part"
  got=$(sha256sum < "$dest.part" | cut -d' ' -f1)
  if [ "$got" != "$SHA256" ]; then
    rm -f "$dest.part"
    echo "sha256 mismatch for $TARBALL: got $got, want $SHA256" >&2
    exit 1
  fi
  mv "$dest.part" "$dest"
fi
echo "$dest"
