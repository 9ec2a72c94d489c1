# One image, three ways to build it (build arguments; `make docker-cpu`, `make docker-gpu`):
#
#   GPU, NVIDIA's base (the default, for a machine with a GPU and a registry):
#     docker build -t imgstore .
#   CPU, Debian 12 (the emulated matrix; what a reviewer without a GPU runs):
#     docker build --build-arg BASE=imgstore-base:bookworm --build-arg CAFFE_GPU=0 -t imgstore-cpu .
#   GPU without NVIDIA's image: Debian 12 + CUDA 13 from PyPI's nvidia-* wheels:
#     docker build --build-arg BASE=imgstore-base:bookworm --build-arg CUDA_FROM_WHEELS=1 \
#                  --build-arg CAFFE_CUDA_ARCH=90 -t imgstore-gpu .
#
# docker/build.sh does all three: imgstore-base:bookworm is Debian 12 made by debootstrap, for
# machines that cannot pull images; where pip inside a build cannot use the package registry,
# it serves a wheelhouse (docker/wheelhouse.sh) on the host's loopback (WHEELHOUSE_URL, with
# `docker build --network host`) and pip reads only that. Nothing of the wheelhouse stays in
# the image. /etc/imgstore-image says which base, pip source and Caffe build the image has.
ARG BASE=nvidia/cuda:13.0.0-cudnn-devel-ubuntu24.04
FROM ${BASE}
# every layer of the build carries it, so docker/build.sh removes this project's unused layers only
LABEL org.imgstore.project=imgstore
ARG BASE
ARG CAFFE_GPU=1
ARG CAFFE_CUDA_ARCH="75 80 86 89 90"
ARG CUDA_FROM_WHEELS=0
ARG WHEELHOUSE_URL=""
ARG WHEELHOUSE_NOTE=""

ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update && apt-get install -y --no-install-recommends \
        make git ca-certificates debian-archive-keyring sudo procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /work
COPY docker/ docker/
COPY caffe/ caffe/
COPY experiments/cppmem/ experiments/cppmem/
COPY monitor/cpu_probe.cpp monitor/
COPY scripts/ scripts/
COPY requirements.txt Makefile ./
COPY data_prep/apt-packages.txt data_prep/
# system packages, the venv's requirements, CUDA (if from wheels) and Caffe, in a layer of their own
RUN if [ -n "$WHEELHOUSE_URL" ]; then export PIP_NO_INDEX=1 PIP_FIND_LINKS="$WHEELHOUSE_URL"; \
        pip_source="wheelhouse served by the host during the build ($WHEELHOUSE_NOTE)"; \
    else pip_source="the package registry"; fi \
    && printf 'base=%s\npip_source=%s\n' "$BASE" "$pip_source" > /etc/imgstore-image \
    && scripts/apt_install.sh caffe/apt-packages.txt data_prep/apt-packages.txt \
    && scripts/venv.sh \
    && if [ "$CUDA_FROM_WHEELS" = 1 ]; then docker/cuda_from_wheels.sh /usr/local/cuda-13.0; fi \
    && CAFFE_GPU=$CAFFE_GPU CAFFE_CUDA_ARCH="$CAFFE_CUDA_ARCH" make caffe \
    && printf 'caffe_build=%s\ncaffe_gpu=%s\n' "$(cat .build/caffe.key)" "$CAFFE_GPU" >> /etc/imgstore-image \
    && if [ "$CAFFE_GPU" = 1 ]; then printf 'cuda_arch=%s\ncuda_from_wheels=%s\n' \
         "$CAFFE_CUDA_ARCH" "$CUDA_FROM_WHEELS" >> /etc/imgstore-image; fi \
    && rm -rf /var/lib/apt/lists/* /root/.cache/pip
COPY . .
# the project itself into the venv (pip install -e ., as scripts/venv.sh does everywhere): the
# `imgstore` command; built by the setuptools the layer above installed, so nothing is fetched
RUN scripts/venv.sh && .venv/bin/imgstore --help > /dev/null
ENV CAFFE_GPU=${CAFFE_GPU}
CMD ["make", "mnist-all"]
