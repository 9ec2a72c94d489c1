# CUDA 13 + cuDNN 9 on Ubuntu 24.04, Caffe built from source with the GPU on, the project's
# Python env and data tools. A thin layer over the same scripts CI runs (make setup).
#   docker build -t imgstore .
#   docker run --gpus all --privileged -v $PWD/results:/work/results imgstore make mnist-all
FROM nvidia/cuda:13.0.0-cudnn-devel-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends \
        make git ca-certificates debian-archive-keyring sudo \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /work
COPY caffe/ caffe/
COPY experiments/cppmem/ experiments/cppmem/
COPY scripts/ scripts/
COPY requirements.txt Makefile ./
COPY data_prep/apt-packages.txt data_prep/
# Caffe (GPU), the venv and the system packages, in a layer of their own
RUN CAFFE_GPU=1 make caffe data-deps && rm -rf /var/lib/apt/lists/*
COPY . .
ENV CAFFE_GPU=1
CMD ["make", "mnist-all"]
