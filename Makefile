# ringleader — the commands README.md promises. `make help` lists them.
#
# Two environments. The heavy one holds the third-party dependencies only: installed from requirements.lock
# (every transitive dependency pinned with hashes; `make lock` writes it from pyproject.toml) into a cache keyed
# by the lock's hash, shared by every checkout on the machine and never written after it is made. The light one
# is this checkout's own `.venv`: a few kilobytes that put the shared dependencies on its path and install this
# checkout's package (editable) and its `ringleader` command, so two clones side by side each run their own code.
# Override DEPS=... to use another dependency environment.

SHELL := /bin/bash
CACHE ?= $(HOME)/.cache/ringleader
DEPS_HASH := $(shell sha256sum < requirements.lock | cut -c1-12)
DEPS ?= $(CACHE)/deps-$(DEPS_HASH)
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
# Both cores; a file's tests on one worker, so that its module fixtures run once (mk/test.sh runs the same).
PYTEST := $(PY) -m pytest -q -n 2 --dist loadfile
export RINGLEADER_CACHE := $(CACHE)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# MLflow 3 sends telemetry from `import mlflow` unless disabled; tests talk only to loopback.
export MLFLOW_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := true

.PHONY: help venv install lock lock-check lint crds crds-check unit integration operator-tests test run ui report predict whatif clean

help:  ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

# No prerequisite: the path already carries the lock's hash, and a fresh clone's mtimes mean nothing.
# --no-deps: the lock is complete, so nothing outside it can slip in; pip checks the hashes. Built beside its
# final path and moved there whole, so a build that was stopped half-way is never taken for a finished one.
$(DEPS)/.deps-installed:
	@echo ">> creating $(DEPS) from requirements.lock (first time: downloads torch and mlflow, several minutes)"
	@rm -rf $(DEPS).tmp && python3 -m venv --prompt $(notdir $(DEPS)) $(DEPS).tmp
	@$(DEPS).tmp/bin/pip install --quiet --progress-bar off --require-hashes --no-deps -r requirements.lock
	@# Its commands' `#!` lines and activate scripts name the build's path: made to name the final one (text files
	@# only, never through a link: bin/python is one).
	@grep -lIF '$(DEPS).tmp' $(DEPS).tmp/bin/* | while read -r f; do [ -L "$$f" ] || sed -i 's|$(DEPS).tmp|$(DEPS)|g' "$$f"; done
	@touch $(DEPS).tmp/.deps-installed && rm -rf $(DEPS) && mv $(DEPS).tmp $(DEPS)

# This checkout's environment: its own interpreter link, the shared dependencies on its path (a .pth line),
# this checkout's package installed editable, and the shared environment's commands (mlflow, pytest, ...)
# re-pointed at this interpreter. Remade only when the dependency environment or pyproject.toml changed.
VENV_STAMP := $(DEPS) $(shell sha256sum < pyproject.toml | cut -c1-12)

venv: lock-check $(DEPS)/.deps-installed  ## create this checkout's Python environment .venv (its package; the dependencies shared, cached by requirements.lock)
	@if [ -e .venv ] && [ ! -f .venv/pyvenv.cfg ] || [ -L .venv ]; then \
	  echo ">> .venv is not this checkout's environment (a link or a file, from an older ringleader): replacing it"; rm -rf .venv; fi
	@if [ "$$(cat .venv/.ringleader-stamp 2>/dev/null)" != "$(VENV_STAMP)" ]; then \
	  python3 mk/venv.py --deps $(DEPS) --venv $(VENV) && echo "$(VENV_STAMP)" > .venv/.ringleader-stamp && \
	  echo ">> environment: .venv (\`source .venv/bin/activate\` puts ringleader and mlflow on PATH; dependencies in $(DEPS))"; fi

install: venv  ## alias of venv

lock:  ## resolve pyproject.toml again into requirements.lock and requirements-runtime.lock (uv, pinned; shows what changed)
	@v=$$(python3 mk/lock.py uv-version); tools=$(CACHE)/uv-$$v; \
	[ -x $$tools/bin/uv ] || { python3 -m venv $$tools && $$tools/bin/pip install --quiet uv==$$v; }; \
	python3 mk/lock.py write --uv $$tools/bin/uv
	@git diff --no-color -U0 -- requirements.lock | grep -E '^[-+][A-Za-z0-9]' || echo ">> lock: no version changed"

lock-check:  ## fail, naming the fix, when a lock file is stale against pyproject.toml
	@python3 mk/lock.py check

lint: venv  ## ruff (faults, and line length) and mypy over the package, as pyproject.toml configures them
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

crds: venv  ## regenerate crds/ (and the chart's copy) from the pydantic models
	$(PY) -m ringleader.api.crd --out crds/ --out charts/ringleader/crds/
	$(PY) -m ringleader.api.crd --docs docs/api.md

crds-check: venv  ## fail if crds/ is not what the models generate
	$(PY) -m ringleader.api.crd --check crds/ charts/ringleader/crds/

unit: venv  ## unit tests
	$(PYTEST) tests/unit

integration: venv  ## integration tests: real torch.distributed processes on loopback, a real MLflow store
	$(PYTEST) tests/integration

operator-tests: venv cluster-build  ## operator tests against a real kube-apiserver (binaries from cluster-build)
	$(PYTEST) tests/operator

# The tiers, their order, what runs beside what, and the time table at the end: mk/test.sh.
test:  ## everything CI runs, each tier timed against CI's 90 minutes: lint, integration (the browser test too), unit, operator, then e2e on a real three-node cluster
	@MAKE="$(MAKE)" mk/test.sh

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
