#!/usr/bin/env bash
# Install the Debian/Ubuntu packages listed in the given files (one per line, '#' comments),
# only those missing. As root it runs apt-get; otherwise it prints the exact line to run.
set -euo pipefail
pkgs=$(grep -hv '^\s*#' "$@" | awk 'NF {print $1}')
missing=()
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" != 0 ]; then
  echo "Missing system packages. Run as root:" >&2
  echo "  apt-get update && $line" >&2
  exit 1
fi
echo "Installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
