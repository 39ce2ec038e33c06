# The public API of this repo. Every target creates .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
WAREHOUSE ?= data/warehouse.duckdb
ARGS ?=

.PHONY: help install ingest report serve demo test test-fast lint sample models bench bench-lake screenshots clean

help:  ## list the targets (with the values they use now; change them as in make bench SIZE=256)
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}' \
		| sed -e 's|$$(WAREHOUSE)|$(WAREHOUSE)|g' -e 's|$$(SIZE)|$(SIZE)|g' -e 's|$$(TEST_WORKERS)|$(TEST_WORKERS)|g'
	@echo "  values: WAREHOUSE=$(WAREHOUSE) SIZE=$(SIZE) ARGS='$(ARGS)'"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,progress]'
	@touch $(STAMP)

install: $(STAMP)  ## create .venv and install the pipeline with its dev tools

ingest: $(STAMP)  ## ingest this machine's Copilot history into $(WAREHOUSE) (ARGS="--full" etc.)
	$(PY) -m pipeline ingest --warehouse $(WAREHOUSE) $(ARGS)

report: $(STAMP)  ## parquet, the wiki and the HTML site from $(WAREHOUSE) into data/
	$(PY) -m pipeline report --warehouse $(WAREHOUSE) $(ARGS)

serve: $(STAMP)  ## serve data/site on http://127.0.0.1:8000 with live search over $(WAREHOUSE)
	$(PY) -m pipeline serve --warehouse $(WAREHOUSE) $(ARGS)

models: $(STAMP)  ## rebuild the SQL models in sql/ on $(WAREHOUSE) and run the checks
	$(PY) -m pipeline models --warehouse $(WAREHOUSE)

demo: $(STAMP)  ## ingest + report on the bundled sample corpus into data/demo/
	$(PY) -m pipeline demo $(ARGS)

# test processes (pytest-xdist): the cores, at most 4; TEST_WORKERS=0 runs the tests in this process
TEST_WORKERS ?= $(shell n=$$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
test: $(STAMP)  ## run the test suite on $(TEST_WORKERS) processes
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(ARGS)

test-fast: $(STAMP)  ## the edit-test loop: the suite without its slow modules (tests/conftest.SLOW_MODULES)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not slow" $(ARGS)

lint: $(STAMP)  ## ruff on Python, sqlfluff on SQL
	$(VENV)/bin/ruff check pipeline tests tools
	$(VENV)/bin/sqlfluff lint sql

SIZE ?= 1024
bench: $(STAMP)  ## timings and peak memory: SIZE-MB corpora (events, outputs), one 500 MB log, one session of 200,000 tool calls, each step the median of 3 rounds (SIZES=256,512,1024 for scaling; SHAPES=events,calls for some; ROUNDS=1 for a quick look)
	$(PY) -m tools.bench --size-mb $(SIZE) $(if $(SIZES),--sizes $(SIZES),) $(if $(SHAPES),--shapes $(SHAPES),) $(if $(ROUNDS),--rounds $(ROUNDS),)

MACHINES ?= 50,200,1000
bench-lake: $(STAMP)  ## team mode at scale: MACHINES machines in one DuckLake (PostgreSQL when installed), each command timed
	$(PY) -m tools.lake_bench --machines $(MACHINES)

screenshots: $(STAMP)  ## the README's screenshots of the demo site (browser tests, into data/screenshots/)
	SITE_SCREENSHOTS=data/screenshots $(PY) -m pytest -q tests/test_site.py -k "browse or search or leads_with_cost"

sample: $(STAMP)  ## regenerate the synthetic sample corpus under data/sample/
	$(PY) -m tools.sample data/sample

clean:  ## remove generated outputs (warehouse, parquet, demo) and .venv
	rm -rf $(VENV) data/demo data/parquet data/wiki data/site data/warehouse.duckdb data/warehouse.duckdb.wal data/warehouse.duckdb.writer .pytest_cache
