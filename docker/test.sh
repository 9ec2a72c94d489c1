#!/usr/bin/env bash
# make docker-test: build the CPU image (docker/build.sh cpu), run `make DATASET-quick` in it
# with a fresh results folder mounted and no network (the Redis Cluster it starts is the
# container's own, on its loopback), then check the records (docker/check_records.py).
# A container without --privileged cannot write /proc/sys/vm/drop_caches, so cold cells use
# --cold-fallback fadvise and their records say cache_method "fadvise".
#   docker/test.sh [DATASET]      default mnist; DOCKER_TEST_OUT: where the results go
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
dataset=${1:-mnist}
image=${IMAGE:-imgstore-cpu}
IMAGE=$image "$here/build.sh" cpu
out=${DOCKER_TEST_OUT:-$(mktemp -d /tmp/imgstore-docker-test.XXXXXX)}
mkdir -p "$out"
echo "Running make $dataset-quick in $image (results: $out) ..."
start=$(date +%s)
docker run --rm --network none -v "$out:/work/results" "$image" \
  make "$dataset-quick" RUN_ARGS="--cold-fallback fadvise"
echo "make $dataset-quick ran in the container in $(( $(date +%s) - start )) s"
"$root/.venv/bin/python" "$here/check_records.py" "$out" --dataset "$dataset"
echo "docker-test passed: records in $out"
