# prefbo: the two commands are `make demo` (main job) and `make test`.
# Both create .venv on first use and install everything from the package index.
# PyTorch: if .venv has no torch, `$(PREFBO_TORCH)` is installed (default: the
# CPU wheel torch==2.13.0). GPU users: PREFBO_TORCH="torch==2.13.0" with the
# CUDA index configured, or PREFBO_SYSTEM_SITE=1 to reuse a system-wide torch.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PREFBO_TORCH ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: venv demo test lint bench clean

$(VENV)/.prefbo-installed: pyproject.toml
	@if [ ! -x $(PY) ]; then \
	  if [ -n "$(PREFBO_SYSTEM_SITE)" ]; then $(PYTHON) -m venv --system-site-packages $(VENV); \
	  else $(PYTHON) -m venv $(VENV); fi; fi
	$(PY) -m pip install -q --upgrade pip
	@if ! $(PY) -c "import torch" 2>/dev/null; then \
	  echo "installing $(PREFBO_TORCH)"; $(PY) -m pip install -q "$(PREFBO_TORCH)"; fi
	$(PY) -m pip install -q -e ".[dev]"
	@touch $@

venv: $(VENV)/.prefbo-installed

demo: venv
	$(PY) -m prefbo.loop.demo $(DEMO_ARGS)

test: venv
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check prefbo tests benchmarks tutorials tools
	$(PY) tools/check_imports.py && $(PY) tools/check_layout.py

# `make bench` runs the headline benchmark; `make bench BENCH="NAME [options]"`
# any of `python -m benchmarks --help`'s (pages go to benchmarks/results/)
BENCH ?= laplace_vs_botorch
bench: venv
	OMP_NUM_THREADS=1 $(PY) -m benchmarks $(BENCH)

clean:
	rm -rf $(VENV) .pytest_cache
