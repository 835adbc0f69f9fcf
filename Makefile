# The course's two commands: `make lab` (set up and open the course) and `make test`
# (set up and run every check). Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
BENCH_STAMP := $(VENV)/.bench-stamp

.PHONY: setup lab test test-steps check check-all grade notebooks exercises bench

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab --allow-root --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/lessons/00_why_queues.ipynb

# Tests and notebooks run in one pytest run, in parallel, one worker per core (pytest-xdist).
# `--dist loadgroup` spreads the tests one by one and keeps together what conftest.py groups:
# a notebook's cells (one kernel runs them in order) and the tests sharing a module-scoped
# fixture. nbval runs each notebook once; conftest.py checks on that same run that it
# reproduces the committed file byte for byte. PYTEST_WORKERS=0 runs serially;
# PYTEST_ARGS="--durations=40" passes options to pytest. The total time is printed last.
# --max-worker-restart=0: a crashed worker fails the run at once (xdist's replacement worker
# left the course's scheduler waiting for the dead worker's tests, and the run hung).
# One worker more than the usable cores: the tests often wait for a kernel, a server or a
# lease, and a third worker on 2 cores filled that time (make test 213 s against 225-229 s).
PYTEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(len(os.sched_getaffinity(0)) + 1)")
PYTEST_ARGS ?=

test: $(STAMP)
	@start=$$(date +%s); status=0; \
	$(MAKE) --no-print-directory test-steps || status=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s in total, exit status $$status"; \
	exit $$status

test-steps: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check src tests benchmarks conftest.py
	$(BIN)/mypy
	$(BIN)/python -m jobqueue.teaching.exercises verify
	@# The package's bytecode, written once: the run starts a few hundred Python processes
	@# (kernels, checkers, workers) that import jobqueue, and where PYTHONDONTWRITEBYTECODE is
	@# set (as on this course's machines) each would compile its source again (~60 ms each).
	$(BIN)/python -m compileall -q src
	$(BIN)/python -m pytest tests lessons solutions --nbval --nbval-current-env -n $(PYTEST_WORKERS) --dist loadgroup --max-worker-restart=0 $(PYTEST_ARGS)

# make check EX=02_backoff : check one exercise; the last line is the PASS/FAIL verdict.
# A FAIL verdict is an answer, not a broken command, so make itself succeeds (exit 1 of the
# checker); errors such as an unknown exercise (exit 2) still fail. Scripts that need the
# verdict as an exit status run `python -m jobqueue.teaching.exercises check` directly.
check: $(STAMP)
	@test -n "$(EX)" || { echo "usage: make check EX=02_backoff"; exit 2; }
	@$(BIN)/python -m jobqueue.teaching.exercises check $(EX) || [ $$? -eq 1 ]

# make check-all : check every exercise you have started (the CI of a learner's repository,
# .github/workflows/exercises.yml, runs this); fails while any started exercise fails.
check-all: $(STAMP)
	$(BIN)/python -m jobqueue.teaching.exercises check-all

# make grade SUBMISSIONS=class/ : grade one folder per learner into gradebook.csv and feedback/.
# GRADE_OPTS="--timeout 30 --exercise 02_backoff" passes options through.
grade: $(STAMP)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder-with-one-folder-per-learner"; exit 2; }
	$(BIN)/python -m jobqueue.teaching.exercises grade "$(SUBMISSIONS)" --out gradebook.csv $(GRADE_OPTS)

# Re-run lessons and solutions, storing normalised outputs, then regenerate exercises/.
notebooks: $(STAMP)
	$(BIN)/python -m jobqueue.teaching.notebooks run lessons/*.ipynb solutions/*.ipynb
	$(BIN)/python -m jobqueue.teaching.exercises build

exercises: $(STAMP)
	$(BIN)/python -m jobqueue.teaching.exercises build

# Every script runs and prints its figures beside their goals; make fails at the end if any
# goal was NOT met (a script exits 1), see benchmarks/README.md. The peers are in the bench extra.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(STAMP) $(BENCH_STAMP)
	status=0; \
	$(BIN)/python benchmarks/queue_throughput.py || status=1; \
	$(BIN)/python benchmarks/durable_throughput.py || status=1; \
	$(BIN)/python benchmarks/durable_statements.py || status=1; \
	$(BIN)/python benchmarks/worker_concurrency.py || status=1; \
	$(BIN)/python benchmarks/postgres_throughput.py || status=1; \
	$(BIN)/python benchmarks/postgres_row_costs.py || status=1; \
	$(BIN)/python benchmarks/dashboard_refresh.py || status=1; \
	$(BIN)/python benchmarks/postgres_workers.py || status=1; \
	$(BIN)/python benchmarks/postgres_claim_index.py || status=1; \
	exit $$status
