#!/usr/bin/env bash
# Debian's Valkey (from bookworm-backports: Debian 12 itself has none) unpacked into the cache,
# not installed: no service, no change to the system's apt sources. Prints the path of its
# valkey-server, which tests and `benchmarks/multihost.py --server` start on hosts of their own.
set -euo pipefail
source "$(dirname "$0")/defaults.sh"
VERSION=8.0.1+dfsg1-1~bpo12+1
dest=$IMGSTORE_CACHE/valkey-$VERSION
if [ ! -x "$dest/usr/bin/valkey-server" ]; then
  mkdir -p "$IMGSTORE_CACHE"
  tmp=$(mktemp -d "$IMGSTORE_CACHE/valkey.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  private_apt bookworm-backports deb
  apt-get "${apt_opts[@]}" update >&2
  (cd "$tmp" && apt-get "${apt_opts[@]}" download "valkey-server=$VERSION" "valkey-tools=$VERSION" >&2)
  for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
  # its libraries (jemalloc, lzf, OpenSSL) are Debian 12's, the ones redis-server uses
  "$tmp/root/usr/bin/valkey-server" --version >&2
  rm -rf "$dest"
  mv "$tmp/root" "$dest"
fi
echo "$dest/usr/bin/valkey-server"
