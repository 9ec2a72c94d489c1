#!/usr/bin/env bash
# Build the project's image on a machine where neither images nor pip packages can be pulled
# inside a build (make docker-cpu, make docker-gpu).
#   docker/build.sh cpu         imgstore-cpu: Debian 12, Caffe CPU-only; runs the emulated matrix
#   docker/build.sh gpu         imgstore-gpu: Debian 12 + CUDA 13 and cuDNN 9 from PyPI's wheels,
#                               Caffe for CAFFE_CUDA_ARCH (default 90, the H100); built here, runs on a GPU host
#   docker/build.sh gpu-nvidia  imgstore: NVIDIA's CUDA 13 + cuDNN 9 image (a registry that has it)
# Each step is skipped when already done:
#   1. a Docker daemon: if none answers and this is root, Debian's docker.io is installed and
#      `dockerd --iptables=false --bridge=none` started (log: CACHE/dockerd.log);
#   2. the base image imgstore-base:bookworm: `debootstrap --variant=minbase bookworm`, imported;
#   3. a wheelhouse (docker/wheelhouse.sh), served on 127.0.0.1 to the build's pip only and
#      stopped after it (DOCKER_WHEELHOUSE=0: pip in the build uses the registry instead).
# Builds run with --network host (the daemon has no bridge). IMAGE overrides the tag.
# Every layer of a build carries the label org.imgstore.project: before and after each build the
# project's layers no image uses any more (an image the build replaced, a failed build's steps)
# are removed, and none other; a build starts only with DOCKER_MIN_FREE_GB (default 8) free
# where the daemon keeps its images.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
source "$root/scripts/defaults.sh"
variant=${1:?usage: docker/build.sh cpu|gpu|gpu-nvidia}
base_image=imgstore-base:bookworm
mkdir -p "$IMGSTORE_CACHE"

ensure_daemon() {
  docker info >/dev/null 2>&1 && return
  [ "$(id -u)" = 0 ] || { echo "no Docker daemon answers, and starting one needs root" >&2; exit 1; }
  "$root/scripts/apt_install.sh" "$here/apt-packages.txt"
  docker info >/dev/null 2>&1 && return
  echo "Starting dockerd --iptables=false --bridge=none (log: $IMGSTORE_CACHE/dockerd.log)"
  setsid dockerd --iptables=false --bridge=none > "$IMGSTORE_CACHE/dockerd.log" 2>&1 < /dev/null &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && return; sleep 1; done
  tail -5 "$IMGSTORE_CACHE/dockerd.log" >&2
  echo "dockerd did not answer within 60 s; its log: $IMGSTORE_CACHE/dockerd.log" >&2
  exit 1
}

ensure_base() {
  docker image inspect "$base_image" >/dev/null 2>&1 && return
  "$root/scripts/apt_install.sh" "$here/apt-packages.txt"
  local mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian} tmp
  tmp=$(mktemp -d)
  echo "Making $base_image: debootstrap --variant=minbase bookworm from $mirror ..."
  debootstrap --variant=minbase bookworm "$tmp/rootfs" "$mirror" > "$tmp/debootstrap.log" 2>&1 ||
    { tail -20 "$tmp/debootstrap.log" >&2; rm -rf "$tmp"; echo "debootstrap failed" >&2; exit 1; }
  tar -C "$tmp/rootfs" -c . |
    docker import -c 'CMD ["/bin/bash"]' -m "debootstrap --variant=minbase bookworm $mirror" - "$base_image" >/dev/null
  rm -rf "$tmp"
}

remove_unused_layers() {
  docker image prune -f --filter label=org.imgstore.project=imgstore | grep -v '^Total' || true
}

ensure_space() {
  local dir need free
  dir=$(docker info -f '{{.DockerRootDir}}')
  need=${DOCKER_MIN_FREE_GB:-8}
  free=$(df -P -BG "$dir" | awk 'NR == 2 {sub("G", "", $4); print $4}')
  [ "$free" -ge "$need" ] && return
  echo "only ${free} GB free in $dir (the Docker daemon's images), and a build needs about ${need} GB" >&2
  echo "(DOCKER_MIN_FREE_GB); \`docker system df\` shows what holds it" >&2
  exit 1
}

serve_wheelhouse() {  # $1: wheel set; sets wheel_args to the build arguments that point pip at it
  wheel_args=()
  [ "${DOCKER_WHEELHOUSE:-1}" = 1 ] || return 0
  "$root/scripts/venv.sh"
  local dir port
  dir=$("$here/wheelhouse.sh" "$1")
  port=$("$root/.venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$root/.venv/bin/python" -m http.server "$port" --bind 127.0.0.1 --directory "$dir" > /dev/null 2>&1 &
  server=$!
  trap 'kill $server 2>/dev/null || true' EXIT
  wheel_args=(--build-arg "WHEELHOUSE_URL=http://127.0.0.1:$port/"
              --build-arg "WHEELHOUSE_NOTE=docker/wheelhouse.sh $1: $(ls "$dir"/*.whl | wc -l) wheels")
}

build_args=()
case "$variant" in
  cpu) image=${IMAGE:-imgstore-cpu}; wheels=cpu
       build_args=(--build-arg "BASE=$base_image" --build-arg CAFFE_GPU=0) ;;
  gpu) image=${IMAGE:-imgstore-gpu}; wheels=gpu
       build_args=(--build-arg "BASE=$base_image" --build-arg CAFFE_GPU=1 --build-arg CUDA_FROM_WHEELS=1
                   --build-arg "CAFFE_CUDA_ARCH=${CAFFE_CUDA_ARCH:-90}") ;;
  gpu-nvidia) image=${IMAGE:-imgstore}; wheels=""
       if [ -n "${CAFFE_CUDA_ARCH:-}" ]; then build_args=(--build-arg "CAFFE_CUDA_ARCH=$CAFFE_CUDA_ARCH"); fi ;;
  *) echo "variant must be cpu, gpu or gpu-nvidia, not '$variant'" >&2; exit 2 ;;
esac

ensure_daemon
remove_unused_layers
ensure_space
[ "$variant" = gpu-nvidia ] || ensure_base
wheel_args=()
if [ -n "$wheels" ]; then serve_wheelhouse "$wheels"; fi
echo "Building $image ($variant) ..."
start=$(date +%s)
built=0
docker build --force-rm --network host "${build_args[@]}" "${wheel_args[@]}" -t "$image" "$root" && built=1
remove_unused_layers
[ "$built" = 1 ] || { echo "docker build of $image failed (above)" >&2; exit 1; }
echo "Built $image in $(( $(date +%s) - start )) s, $(docker image inspect -f '{{.Size}}' "$image" |
      awk '{printf "%.1f GB", $1 / 1e9}'):"
docker run --rm --network none "$image" cat /etc/imgstore-image | sed 's/^/  /'
if [ "$variant" != cpu ]; then
  # it cannot run here (no GPU), so check what was built: Caffe's GPU code and the emulated
  # accelerator's GPU functions in libcaffe.so, compiled for the asked architectures
  docker run --rm --network none "$image" sh -c '
    lib=.build/caffe/lib/libcaffe.so
    n=$(nm -DC "$lib" | grep -c "EmulatedComputeLayer<float>::\(Forward\|Backward\)_gpu")
    echo "  $lib: $n of 2 EmulatedCompute GPU functions (float); architectures: $(/usr/local/cuda/bin/cuobjdump --list-elf "$lib" 2>/dev/null | grep -o "sm_[0-9]*" | sort -u | tr "\n" " ")"
    [ "$n" = 2 ]'
fi
