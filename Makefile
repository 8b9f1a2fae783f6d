# Entry points: `make run` (dev broker) and `make test` (everything CI runs).
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck bench clean install

$(VPY):
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q -U pip

$(STAMP): $(VPY) pyproject.toml
	$(VPY) -m pip install -q -e '.[fast,cli,test,lint]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/rocketlite dev

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

test: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy
	$(VPY) -m pytest

bench: $(STAMP)
	$(VPY) bench/store_bench.py

clean:
	rm -rf $(VENV) build *.egg-info
