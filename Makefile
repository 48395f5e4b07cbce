# The two set-up commands of the README, plus helpers. Each creates .venv and installs what it needs.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)

.PHONY: demo test test-all lint schema install wheel clean browser

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "replimon needs Python 3.11, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -c constraints.txt -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

## The main job on the embedded default: broker, PostgreSQL, simulator, live view (Ctrl-C stops).
demo: $(STAMP)
	$(VENV)/bin/replimon demo

## Debian's Chromium for the postmortem report's browser test (tests/replay/test_report.py).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium fonts-liberation; }

## The default test suite (what CI runs). Heavier runs: make test-all.
test: $(STAMP) browser
	$(VENV)/bin/python -m pytest -q

test-all: $(STAMP) browser
	$(VENV)/bin/python -m pytest -q -m "slow or not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check replimon producers streaming tests
	$(VENV)/bin/mypy replimon
	@# The whole package as installed (dashboards/, streaming/, producers/ are sub-packages that
	@# live beside replimon/): mypy cannot follow setuptools' package-dir, so a tree of symlinks.
	rm -rf build/mypy && mkdir -p build/mypy && cp -rs $(CURDIR)/replimon build/mypy/replimon
	for d in dashboards streaming producers; do ln -s $(CURDIR)/$$d build/mypy/replimon/$$d; done
	cd build/mypy && $(CURDIR)/$(VENV)/bin/mypy --config-file $(CURDIR)/pyproject.toml -p replimon
	$(VENV)/bin/replimon schema --check

schema: $(STAMP)
	$(VENV)/bin/replimon schema --write

## The job as a wheel in dist/, for spark-submit on a cluster (docs/cluster.md).
## (build/ goes first: setuptools would pack files left there by an earlier build of a deleted module)
wheel: $(STAMP)
	rm -rf build
	$(VENV)/bin/python -m pip wheel . --no-deps -w dist

clean:
	rm -rf $(VENV) var .pytest_cache
