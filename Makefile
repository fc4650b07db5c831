# ringleader — the commands README.md promises. `make help` lists them.
#
# The Python environment lives in a cache keyed by pyproject.toml's hash, so a fresh clone reuses it
# and a dependency change builds a new one. Override with VENV=... to use your own.

SHELL := /bin/bash
CACHE ?= $(HOME)/.cache/ringleader
DEPS_HASH := $(shell sha256sum pyproject.toml | cut -c1-12)
VENV ?= $(CACHE)/venv-$(DEPS_HASH)
PY := $(VENV)/bin/python
export RINGLEADER_CACHE := $(CACHE)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# MLflow 3 sends telemetry from `import mlflow` unless disabled; tests talk only to loopback.
export MLFLOW_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := true

.PHONY: help venv install crds crds-check unit integration operator-tests test run ui clean

help:  ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

# No prerequisite: the path already carries pyproject.toml's hash, and a fresh clone's mtimes mean nothing.
$(VENV)/.deps-installed:
	@echo ">> creating $(VENV) (first time: downloads torch and mlflow, several minutes)"
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip "setuptools>=68" wheel
	$(VENV)/bin/pip install --quiet --progress-bar off -e '.[test]'
	touch $@

venv: $(VENV)/.deps-installed  ## create the Python environment (cached) and install ringleader into it
	@$(VENV)/bin/pip install --quiet --no-deps --no-build-isolation -e . >/dev/null
	@echo ">> environment: $(VENV)"

install: venv  ## alias of venv

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

# cluster-build first: the chart tests need its helm, the operator tests its kube-apiserver and etcd;
# browser-deps: the MLflow UI test needs Chromium.
test: venv crds-check cluster-build browser-deps  ## everything CI runs: unit, integration (the browser test too), operator, then e2e on a real cluster
	RINGLEADER_HEAVY_TESTS=1 $(PY) -m pytest tests/unit tests/integration tests/operator -q
	$(MAKE) e2e

run: venv  ## the main job: run the quickstart experiment locally into ./mlflow.db
	$(VENV)/bin/ringleader run examples/quickstart.yaml

ui: venv  ## open the MLflow UI on ./mlflow.db (what `make run` recorded), at http://127.0.0.1:5000
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1 --port 5000

clean:  ## remove local run outputs (not the cache)
	rm -rf mlflow.db mlruns ringleader-runs .pytest_cache

-include mk/*.mk
