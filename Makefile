# Set-up is part of every target: a fresh machine needs only `make demo` or `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow lint format bench bench-peers bench-models clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,models,thirdparty]'
	touch $(STAMP)

# Tunes a 512^3 matmul for 64 trials on this machine (SQLite file demo.db, local runner, ~1 minute),
# then shows the winning program and its trace. Running it again continues from demo.db.
demo: $(STAMP)
	$(VENV)/bin/tuner tune matmul M=512 N=512 K=512 --trials 64 --database sqlite:///demo.db --plot demo-curve.png
	$(VENV)/bin/tuner show matmul M=512 N=512 K=512 --database sqlite:///demo.db

# The dashboard test drives Debian's headless Chromium: a machine without it gets it here, once (as
# root, or through sudo). When both files exist, make does nothing and apt is not called.
CHROMIUM := /usr/bin/chromium /usr/bin/chromedriver
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
APT := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get

$(CHROMIUM) &:
	$(APT) update
	$(APT) install -y --no-install-recommends chromium chromium-driver

# The default run leaves out the tests marked slow (third-party models, the ONNX node suite), which
# would take CI past its budget on a 2-core host; test-slow runs exactly those.
test: $(STAMP) $(CHROMIUM)
	$(PY) -m pytest -q -n 2 -m "not slow" --durations=15

test-slow: $(STAMP)
	$(PY) -m pytest -q -n 2 -m slow

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) -m bench

# TVM MetaSchedule, the peer of bench-peers, lives in its own venv: never a dependency of ours.
# apache-tvm-ffi is pinned because newer ones segfault in MetaSchedule's database; the popen-pool extra
# brings what its builder and runner import (psutil, cloudpickle); its cost model needs XGBoost, taken
# as the CPU-only build (as ours: the plain one pulls NVIDIA's NCCL) at the version validated with it.
TVM_VENV := .venv-tvm
TVM_STAMP := $(TVM_VENV)/.installed
TVM_PACKAGES := 'apache-tvm[popen-pool]==0.27.0.post1' apache-tvm-ffi==0.1.14.post0 xgboost-cpu==3.2.0 numpy

$(TVM_STAMP):
	$(PYTHON) -m venv $(TVM_VENV)
	$(TVM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TVM_VENV)/bin/python -m pip install --quiet $(TVM_PACKAGES)
	touch $(TVM_STAMP)

# Our tuner and TVM's on the layer shapes of bench/peer_suite.py, timed side by side: hours at 64
# and 256 trials, so run it on a quiet machine. A part: make bench-peers TRIALS=64 SHAPES="mlp.fc1 bert.proj";
# as an AVX2 machine (issue 12's emulated target): make bench-peers TARGET=znver3. KEEP=DIR keeps the
# databases, libraries and logs in DIR, and the same command again continues a run that was stopped.
TRIALS ?= 64 256
SHAPES ?=
TARGET ?=
KEEP ?=
bench-peers: $(STAMP) $(TVM_STAMP)
	$(PY) -m bench.peers --trials $(TRIALS) $(if $(strip $(SHAPES)),--shapes $(SHAPES)) $(if $(TARGET),--target $(TARGET)) $(if $(KEEP),--keep $(KEEP) --resume)

# Every zoo and Hugging Face model against ONNX Runtime, OpenVINO, torch.compile and PyTorch eager in
# one process (bench/model_peers.py), untuned and after each budget of BUDGETS trials (each budget
# continues the last). OpenVINO is a peer, not a dependency: this target installs it beside the
# benchmark. A part: make bench-models MODELS="resnet18 hf_bert" BUDGETS="0 300 2000".
OPENVINO := openvino==2026.4.1
BUDGETS ?= 0
MODELS ?=
bench-models: $(STAMP)
	$(VENV)/bin/python -m pip install --quiet $(OPENVINO)
	$(PY) -m bench.model_peers --budgets $(BUDGETS) $(if $(strip $(MODELS)),--models $(MODELS))

clean:
	rm -rf $(VENV) $(TVM_VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
