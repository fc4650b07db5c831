# ringleader — the commands README.md promises. `make help` lists them.
#
# The Python environment is installed from requirements.lock (every transitive dependency pinned with
# hashes; `make lock` writes it from pyproject.toml) into a cache keyed by the lock's hash, so a fresh
# clone reuses it and a dependency change builds a new one; `.venv` in the checkout links to it. Only the
# lock: a change to pyproject.toml's tool settings ([tool.ruff], [tool.mypy]) reinstalls nothing, and one
# to its dependencies changes the lock (lock-check fails until it does).
# Override with VENV=... to use your own.

SHELL := /bin/bash
CACHE ?= $(HOME)/.cache/ringleader
DEPS_HASH := $(shell sha256sum < requirements.lock | cut -c1-12)
VENV ?= $(CACHE)/venv-$(DEPS_HASH)
PY := $(VENV)/bin/python
export RINGLEADER_CACHE := $(CACHE)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# MLflow 3 sends telemetry from `import mlflow` unless disabled; tests talk only to loopback.
export MLFLOW_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := true

.PHONY: help venv install lock lock-check lint crds crds-check unit integration operator-tests test run ui report predict whatif clean

help:  ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

# No prerequisite: the path already carries the lock's hash, and a fresh clone's mtimes mean nothing.
# --no-deps: the lock is complete, so nothing outside it can slip in; the venv's own pip checks the hashes.
$(VENV)/.deps-installed:
	@echo ">> creating $(VENV) from requirements.lock (first time: downloads torch and mlflow, several minutes)"
	@python3 -m venv $(VENV)
	@$(VENV)/bin/pip install --quiet --progress-bar off --require-hashes --no-deps -r requirements.lock
	@touch $@
	@echo ">> environment: $(VENV) (linked as .venv: \`source .venv/bin/activate\` puts ringleader and mlflow on PATH)"

# The editable install (about 3.5 s) runs again only when pyproject.toml changed or another checkout installed
# itself into the shared venv since: its stamp names this checkout and pyproject.toml's hash.
EDITABLE := $(CURDIR) $(shell sha256sum < pyproject.toml | cut -c1-12)

venv: lock-check $(VENV)/.deps-installed  ## create the Python environment (cached, from requirements.lock) and link it as .venv
	@if [ "$$(cat $(VENV)/.editable 2>/dev/null)" != "$(EDITABLE)" ]; then \
	  $(VENV)/bin/pip install --quiet --no-deps --no-build-isolation -e . >/dev/null && echo "$(EDITABLE)" > $(VENV)/.editable; fi
	@if [ -L .venv ] || [ ! -e .venv ]; then ln -sfn $(VENV) .venv; else echo ">> .venv exists and is not a link: left alone"; fi

install: venv  ## alias of venv

lock:  ## resolve pyproject.toml again into requirements.lock and requirements-runtime.lock (uv, pinned; shows what changed)
	@v=$$(python3 mk/lock.py uv-version); tools=$(CACHE)/uv-$$v; \
	[ -x $$tools/bin/uv ] || { python3 -m venv $$tools && $$tools/bin/pip install --quiet uv==$$v; }; \
	python3 mk/lock.py write --uv $$tools/bin/uv
	@git diff --no-color -U0 -- requirements.lock | grep -E '^[-+][A-Za-z0-9]' || echo ">> lock: no version changed"

lock-check:  ## fail, naming the fix, when a lock file is stale against pyproject.toml
	@python3 mk/lock.py check

lint: venv  ## ruff (faults, not style) and mypy over the package, as pyproject.toml configures them
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

crds: venv  ## regenerate crds/ (and the chart's copy) from the pydantic models
	$(PY) -m ringleader.api.crd --out crds/ --out charts/ringleader/crds/
	$(PY) -m ringleader.api.crd --docs docs/api.md

crds-check: venv  ## fail if crds/ is not what the models generate
	$(PY) -m ringleader.api.crd --check crds/ charts/ringleader/crds/

unit: venv  ## unit tests
	$(PY) -m pytest tests/unit -q

integration: venv  ## integration tests: real torch.distributed processes on loopback, a real MLflow store
	$(PY) -m pytest tests/integration -q

operator-tests: venv cluster-build  ## operator tests against a real kube-apiserver (binaries from cluster-build)
	$(PY) -m pytest tests/operator -q

# lint first: seconds, failing before the tests' minutes. cluster-build: the chart tests need its helm, the
# operator tests its kube-apiserver and etcd; browser-deps: the MLflow UI test needs Chromium.
test: lock-check venv lint crds-check cluster-build browser-deps  ## everything CI runs: lint, unit, integration (the browser test too), operator, then e2e on a real cluster (one node, then the multi-node tests on three)
	RINGLEADER_HEAVY_TESTS=1 $(PY) -m pytest tests/unit tests/integration tests/operator -q
	$(MAKE) e2e
	$(MAKE) e2e-nodes

# The commands a user types are not echoed: their own first line says what they do.
run: venv  ## the main job: run the quickstart experiment locally into ./mlflow.db
	@$(VENV)/bin/ringleader run examples/quickstart.yaml

report: venv  ## the report of the newest run under ringleader-runs/ (what `make run` wrote)
	@$(VENV)/bin/ringleader report ringleader-runs/

predict: venv  ## each trial's predicted iteration time, and the other architectures', for the newest run
	@$(VENV)/bin/ringleader predict ringleader-runs/

whatif: venv  ## scaling factor per worker count, bandwidth and compression, from the newest run's ring trial
	@$(VENV)/bin/ringleader whatif ringleader-runs/ -o whatif.png

ui: venv  ## the MLflow UI on ./mlflow.db (what `make run` recorded); prints the newest sweep's page, model-training view
	@$(VENV)/bin/ringleader ui --tracking-uri sqlite:///mlflow.db

clean:  ## remove local run outputs (not the cache)
	rm -rf mlflow.db mlruns ringleader-runs .pytest_cache

-include mk/*.mk
