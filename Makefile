# The two commands: `make serve` and `make test`. Each sets up .venv when it is missing or
# older than pyproject.toml, so a fresh machine needs nothing else. `make serve` installs kinesim
# with its `spark` extra (`kinesim sql`); `make test` adds the `test` extra (pytest, moto, the AWS
# CLI, Playwright...), which only the tests and benchmarks use.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: serve test bench setup clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[spark]'
	# Node.js 24 and 22 (nodejs24.x, nodejs22.x functions) and the AWS SDK for JavaScript v3 their
	# runtime includes, from the npm registry into the venv, in parallel; without the network, warnings
	# and fewer runtimes. See kinesim/functions/runtime_sdks.py
	$(VENV)/bin/python -m kinesim.functions.runtime_sdks setup
	touch $(STAMP)

# After $(STAMP), so that a newer pyproject.toml (which remade $(STAMP)) makes this again too.
$(TEST_STAMP): $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[spark,test]'
	touch $(TEST_STAMP)

setup: $(STAMP)

serve: $(STAMP)
	$(VENV)/bin/kinesim serve $(ARGS)

# Four test processes, each taking whole files (module fixtures start one server per file): most
# tests wait on servers, Spark, functions or the deploy tools, so more processes than cores still
# pay on 2 cores (with one core kept busy by other work: 16:58 of pytest with two, 12:48-14:29 with
# three; with the tools' tests of issue 31, three took 18:23-19:14 and four 17:55). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 4

test: $(TEST_STAMP)
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

bench: $(TEST_STAMP)
	$(VENV)/bin/python bench/run.py $(ARGS)

clean:
	rm -rf $(VENV) .kinesim .pytest_cache
