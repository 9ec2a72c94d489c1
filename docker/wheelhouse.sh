#!/usr/bin/env bash
# Fill a wheelhouse from this machine's pip, for image builds whose pip cannot use the package
# registry (seen on the CI machine: pip inside a container cannot verify the registry's
# certificate). docker/build.sh serves it to the build on loopback (the Dockerfile's
# WHEELHOUSE_URL); nothing of it is copied into the image.
#   docker/wheelhouse.sh cpu   CACHE/wheels/cpu: requirements.txt + pip + the project's build backend (~170 MiB)
#   docker/wheelhouse.sh gpu   CACHE/wheels/gpu: those + CUDA 13 and cuDNN (docker/cuda-wheels.txt, ~1.1 GiB)
# CACHE is ~/.cache/imgstore-caffe (CAFFE_CACHE); the last line printed is the folder.
# Wheels for this machine's Python, which must be the image's (Debian 12: 3.11). Idempotent:
# a folder whose stamp matches its lists is kept; a half-filled one is never used.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
source "$root/scripts/defaults.sh"
set_name=${1:?usage: docker/wheelhouse.sh cpu|gpu}
lists=("$root/requirements.txt")
case "$set_name" in
  cpu) ;;
  gpu) lists+=("$here/cuda-wheels.txt") ;;
  *) echo "wheel set must be cpu or gpu, not '$set_name'" >&2; exit 2 ;;
esac
pip=${PIP:-$root/.venv/bin/pip}
[ -x "$pip" ] || { echo "no pip at $pip: run make venv first" >&2; exit 1; }
out=$IMGSTORE_CACHE/wheels/$set_name
build_backend=$(sed -n 's/^build_backend=//p' "$root/scripts/venv.sh")  # what builds the project in the image
want=$( { cat "${lists[@]}"; echo "$build_backend"; "$pip" --version | cut -d' ' -f1-2; "$(dirname "$pip")/python" --version; } |
        sha256sum | cut -c1-16)
if [ -f "$out/.complete" ] && [ "$(cat "$out/.complete")" = "$want" ]; then
  echo "wheelhouse: up to date ($(ls "$out"/*.whl | wc -l) wheels)" >&2
  echo "$out"
  exit 0
fi
echo >&2 "Filling wheelhouse $out from $("$(dirname "$pip")/python" --version)'s pip ..."
rm -rf "$out.partial"
mkdir -p "$out.partial"
reqs=()
for l in "${lists[@]}"; do reqs+=(-r "$l"); done
"$pip" download -q --disable-pip-version-check --only-binary=:all: -d "$out.partial" "${reqs[@]}" pip "$build_backend"
echo "$want" > "$out.partial/.complete"
rm -rf "$out"
mv "$out.partial" "$out"
echo "wheelhouse: $(ls "$out"/*.whl | wc -l) wheels, $(du -sh "$out" | cut -f1)" >&2
echo "$out"
