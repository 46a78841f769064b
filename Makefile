# The two commands the README starts with: `make demo` and `make test`. Both install first (idempotent).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: install demo test test-all bench lint clean

install: $(STAMP)

# torch is pinned first so pip takes the CPU wheel instead of resolving a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: install
	$(VENV)/bin/scalerl-env verify --file datasets/samples/math_items.jsonl --out runs/demo/verdicts.jsonl

test: install
	$(PY) -m pytest -q -m "not slow"

test-all: install
	$(PY) -m pytest -q

bench: install
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache runs
