#!/usr/bin/env bash
# Download a source package from Debian bookworm into a folder, through a private apt
# configuration that leaves the system's apt sources alone.
#   device/debian_source.sh PACKAGE=VERSION DEST_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PACKAGE=VERSION DEST_DIR" >&2; exit 2; }
source "$(dirname "$0")/../scripts/defaults.sh"
mkdir -p "$2"
private_apt bookworm
apt-get "${apt_opts[@]}" update >&2
(cd "$2" && apt-get "${apt_opts[@]}" source --download-only "$1" >&2)
