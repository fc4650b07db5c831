# Debian's chromium for the browser test (tests/integration/browser, docs/e2e.md). Included by the top-level Makefile.
# apt runs only when chromium is missing, at most once per call, each step bounded; the time it took is printed.
# The binary, not the /usr/bin/chromium wrapper script; the test reads the same variable.
RINGLEADER_CHROMIUM ?= /usr/lib/chromium/chromium
export RINGLEADER_CHROMIUM

.PHONY: browser-deps

browser-deps: ## install Debian's chromium for the MLflow UI browser test (apt, only when missing)
	@if [ -x $(RINGLEADER_CHROMIUM) ]; then echo ">> browser-deps: $$($(RINGLEADER_CHROMIUM) --version 2>/dev/null)"; else \
	  [ $$(id -u) -eq 0 ] || { echo "browser-deps: need root to apt-get install chromium (or set RINGLEADER_CHROMIUM)"; exit 2; }; \
	  start=$$(date +%s); export DEBIAN_FRONTEND=noninteractive; \
	  echo ">> browser-deps: apt-get install chromium"; \
	  timeout 600 apt-get update -qq && \
	  timeout 900 apt-get install -y -qq --no-install-recommends chromium >/dev/null && \
	  echo ">> browser-deps: $$($(RINGLEADER_CHROMIUM) --version 2>/dev/null) in $$(( $$(date +%s) - start ))s"; fi
