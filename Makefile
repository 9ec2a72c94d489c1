# Entry points. Every target installs what it needs first (apt as root, the venv, Caffe),
# so on a fresh Debian/Ubuntu machine `make test` and `make mnist-all` just work.
SHELL := /bin/bash
PY    := .venv/bin/python
# the project's command (scripts/venv.sh installs it): imgstore --help lists its sub-commands
IMGSTORE := .venv/bin/imgstore
# extra arguments for the runner, e.g. make mnist-all RUN_ARGS="--gpu 0"
RUN_ARGS ?=
# for make redis-start / redis-stop, e.g. REDIS_ARGS="--rtt 10ms --nodes 3"
REDIS_ARGS ?=
# for make gpu-bundle: the python-include.tgz that device/probe.sh wrote on the GPU machine
PY_INCLUDE ?=
# for make capacity: the data, the emulated accelerator, the backends, and more sweep/run.py flags
DATASET ?= mnist
ACCEL ?= h100
CAPACITY_BACKENDS ?= lmdb,images,redis
CAPACITY_ARGS ?= --iters 1000 --max 48
# for make peers-compare: benchmarks/peers.py's flags
PEERS_ARGS ?=
# for make host-check: benchmarks/host_check.py's flags, e.g. HOST_CHECK_ARGS="--dry-run" or "--cpus 1" (another shape)
HOST_CHECK_ARGS ?=
# for make answer: benchmarks/answer_run.py's flags, e.g. ANSWER_ARGS="--quick" or "--dry-run"
ANSWER_ARGS ?=

.PHONY: help setup caffe caffe-gpu caffe-gtest venv data-deps test redis-start redis-stop calibration capacity host-check answer \
        report docs peers peers-compare gpu-bundle gpu-data gpu-calibrate docker-cpu docker-gpu docker-test clean

help:
	@echo "make test            install everything, then run the test suite"
	@echo "make mnist-all       the paper's MNIST matrix: every backend (the paper's six + redis) x warm/cold x 3 repeats; without"
	@echo "                     a GPU on an emulated H100 (RUN_ARGS=\"--accelerator none\": real CPU training)"
	@echo "make cifar10-all     the same for CIFAR-10;  make imagenet-all: ImageNet (lmdb, leveldb, images)"
	@echo "make mnist-quick     a smoke run of the matrix: few iterations, one repeat"
	@echo "make capacity        how many emulated accelerators this host keeps at AU >= 0.90 from LMDB, image files"
	@echo "                     and Redis, ranked, with what stopped each (DATASET=cifar10 ACCEL=titanx2016 ...)"
	@echo "make host-check      do the committed answers apply to this host? its CPU probe, a few reference cells predicted"
	@echo "                     from the probes and measured here, ~6 min on 2 cores (HOST_CHECK_ARGS=\"--dry-run\")"
	@echo "make answer          the README's answer table measured on this host: every dataset x backend, 2016 s, H100 AU"
	@echo "                     and H100s fed; <= 3 h on 2 cores (ANSWER_ARGS=\"--quick\": ~10 min; \"--dry-run\": the plan)"
	@echo "make peers           an optional environment (.venv-peers) with NVIDIA DALI 2.4 and PyTorch 2.13, CPU builds"
	@echo "make peers-compare   Caffe's data path beside DALI and PyTorch's DataLoader on the same LMDB and PNGs, warm and"
	@echo "                     cold (benchmarks/peers.py, PEERS_ARGS=\"--datasets mnist --rounds 1\"; ~30 min as it is)"
	@echo "make report          figures and tables for every results folder (results/ and results/catalogue.toml's)"
	@echo "make calibration     the emulated machines' fitted values checked against their named cells, and the"
	@echo "                     fidelity table (fidelity.md of the catalogue's calibration): every real cell and paper finding vs ours"
	@echo "make redis-start     a 3-node Redis Cluster on loopback (IMGSTORE_REDIS_PASSWORD must be set;"
	@echo "                     REDIS_ARGS=\"--rtt 10ms\" adds a round trip); runs start one themselves if needed"
	@echo "make redis-stop      stop it"
	@echo "make caffe           (re)build Caffe if its source, patches or options changed"
	@echo "make caffe-gpu       the same with CUDA + cuDNN (CAFFE_GPU=1)"
	@echo "make caffe-gtest     build Caffe's own GoogleTest binary in the build tree"
	@echo "make docs            the site of README.md and docs/ with the reports (MkDocs, strict: a broken link fails)"
	@echo "make gpu-bundle PY_INCLUDE=python-include.tgz   Caffe GPU build + libraries for a GPU machine"
	@echo "                     without a package registry (device/bundle.sh; README: GPU machines)"
	@echo "make gpu-data        .device-data/: the Fashion-MNIST files the GPU step carries to a machine without them"
	@echo "make gpu-calibrate   ON the GPU machine (bundle and data carried): the calibration's GPU step in < 10 min"
	@echo "                     (device/gpu_calibrate.py; --dry-run here prints its plan and checks the bundle)"
	@echo "make docker-cpu      the CPU image imgstore-cpu (Debian 12 by debootstrap, wheels from this host's pip)"
	@echo "make docker-gpu      the GPU image imgstore-gpu (Debian 12 + CUDA 13/cuDNN 9 wheels, sm_90), built here"
	@echo "make docker-test     docker-cpu, then make mnist-quick inside it, then check its records"

venv:
	@scripts/venv.sh

caffe:
	@caffe/build.sh
	@caffe/build_tools.sh

caffe-gpu:
	@CAFFE_GPU=1 caffe/build.sh
	@caffe/build_tools.sh

caffe-gtest: caffe
	@caffe/build_gtest.sh

data-deps:
	@scripts/apt_install.sh data_prep/apt-packages.txt

setup: caffe data-deps

test: setup peers
	@$(PY) -m pytest tests --durations=25

redis-start: setup
	@$(IMGSTORE) redis start $(REDIS_ARGS)

redis-stop: venv
	@$(IMGSTORE) redis stop $(REDIS_ARGS)

# DATASET-all and DATASET-quick for every dataset registered in data_prep/datasets (matrix.py
# checks the name): make mnist-all, make cifar10-quick, ...
%-all %-quick: setup
	@$(IMGSTORE) matrix $@ $(RUN_ARGS)

# one report per folder of records: results/ (this machine) and the committed runs (results/catalogue.toml)
# capacity sweeps (folders named *capacity*) have their own analysis: hundreds of groups of solvers
report: setup
	@for d in results results/* results/archive/*; do \
	  if ! compgen -G "$$d/*/records*.jsonl" >/dev/null; then continue; fi; \
	  case $$d in *capacity*) $(IMGSTORE) capacity-report $$d >/dev/null && echo "$$d/report (capacity)" ;; \
	              *) $(IMGSTORE) report $$d --out $$d/report ;; esac; \
	done

capacity: setup
	@$(IMGSTORE) prepare $(DATASET) $(CAPACITY_BACKENDS) --quiet
	@$(IMGSTORE) capacity $(DATASET) $(CAPACITY_BACKENDS) warm --accelerator $(ACCEL) $(CAPACITY_ARGS)

host-check: setup
	@$(IMGSTORE) host-check $(HOST_CHECK_ARGS)

answer: setup
	@$(IMGSTORE) answer $(ANSWER_ARGS)

calibration: venv
	@$(IMGSTORE) calibrate fit --check
	@$(IMGSTORE) calibrate table --readme

peers:
	@VENV=.venv-peers REQUIREMENTS=peers/requirements.txt scripts/venv.sh

peers-compare: setup peers
	@$(IMGSTORE) peers $(PEERS_ARGS)

docs:
	@scripts/apt_install.sh docs/apt-packages.txt
	@VENV=.venv-docs REQUIREMENTS=docs/requirements.txt scripts/venv.sh
	@.venv-docs/bin/python scripts/docs_site.py

gpu-bundle: setup
	@device/bundle.sh --python-include "$(PY_INCLUDE)"

gpu-data:
	@mkdir -p .device-data/fashion-mnist && cp -u /usr/share/datasets/fashion-mnist/* .device-data/fashion-mnist/

gpu-calibrate:
	@bash -c 'source device/env.sh && python3 device/gpu_calibrate.py $(CALIBRATE_ARGS)'

docker-cpu: venv
	@docker/build.sh cpu

docker-gpu: venv
	@docker/build.sh gpu

docker-test: venv
	@docker/test.sh

clean:
	rm -rf .build .venv
