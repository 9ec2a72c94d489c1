#!/usr/bin/env bash
# Download a source package from Debian bookworm into a folder, through a private apt
# configuration that leaves the system's apt sources alone.
#   device/debian_source.sh PACKAGE=VERSION DEST_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PACKAGE=VERSION DEST_DIR" >&2; exit 2; }
cache=${CAFFE_CACHE:-$HOME/.cache/imgstore-caffe}
mkdir -p "$2" "$cache/apt-bookworm/lists/partial"
src_list=$cache/apt-bookworm/sources.list
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" > "$src_list"
apt_opts=(-o "Dir::Etc::SourceList=$src_list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$cache/apt-bookworm/lists" -o APT::Sandbox::User=root -qq)
apt-get "${apt_opts[@]}" update >&2
(cd "$2" && apt-get "${apt_opts[@]}" source --download-only "$1" >&2)
