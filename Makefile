# Set-up is part of every target: a fresh machine needs only `make demo` or `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,models]'
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

test: $(STAMP) $(CHROMIUM)
	$(PY) -m pytest -q -n 2

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
