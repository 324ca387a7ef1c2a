# prefbo: the two commands are `make demo` (main job) and `make test`.
# Both create .venv on first use and install everything from the package index.
# `make docs` builds the documentation site into docs/_build/html (the docs
# extra), warnings and broken internal links failing the build.
# PyTorch: if .venv has no torch, `$(PREFBO_TORCH)` is installed (default: the
# CPU wheel torch==2.13.0). GPU users: PREFBO_TORCH="torch==2.13.0" with the
# CUDA index configured, or PREFBO_SYSTEM_SITE=1 to reuse a system-wide torch.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PREFBO_TORCH ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: venv demo test lint docs bench clean

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

$(VENV)/.prefbo-docs-installed: $(VENV)/.prefbo-installed
	$(PY) -m pip install -q -e ".[docs]"
	@touch $@

demo: venv
	$(PY) -m prefbo.loop.demo $(DEMO_ARGS)

test: venv
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check prefbo tests benchmarks tutorials tools docs
	$(PY) tools/check_imports.py && $(PY) tools/check_layout.py

# a fresh build (-E) every time, so that every page's warnings are seen;
# nitpicky (-n): every reference to a prefbo name, page or heading resolves
docs: $(VENV)/.prefbo-docs-installed
	$(PY) -m sphinx -E -n -W --keep-going -q -b html docs docs/_build/html $(DOCS_ARGS)
	@echo "docs: open docs/_build/html/index.html"

# `make bench` runs the headline benchmark; `make bench BENCH="NAME [options]"`
# any of `python -m benchmarks --help`'s (pages go to benchmarks/results/)
BENCH ?= laplace_vs_botorch
bench: venv
	OMP_NUM_THREADS=1 $(PY) -m benchmarks $(BENCH)

clean:
	rm -rf $(VENV) .pytest_cache docs/_build docs/api docs/tutorials
