# The course's two commands: `make lab` (set up and open the course) and `make test`
# (set up and run every check). Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
BENCH_STAMP := $(VENV)/.bench-stamp

.PHONY: setup lab test check notebooks exercises bench

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab --allow-root --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/lessons/00_why_queues.ipynb

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m jobqueue.teaching.exercises verify
	$(BIN)/python -m pytest tests lessons solutions --nbval --nbval-current-env

# make check EX=02_backoff : check one exercise; the last line is the PASS/FAIL verdict.
# A FAIL verdict is an answer, not a broken command, so make itself succeeds (exit 1 of the
# checker); errors such as an unknown exercise (exit 2) still fail. Scripts that need the
# verdict as an exit status run `python -m jobqueue.teaching.exercises check` directly.
check: $(STAMP)
	@test -n "$(EX)" || { echo "usage: make check EX=02_backoff"; exit 2; }
	@$(BIN)/python -m jobqueue.teaching.exercises check $(EX) || [ $$? -eq 1 ]

# Re-run lessons and solutions, storing normalised outputs, then regenerate exercises/.
notebooks: $(STAMP)
	$(BIN)/python -m jobqueue.teaching.notebooks run lessons/*.ipynb solutions/*.ipynb
	$(BIN)/python -m jobqueue.teaching.exercises build

exercises: $(STAMP)
	$(BIN)/python -m jobqueue.teaching.exercises build

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python benchmarks/queue_throughput.py
	$(BIN)/python benchmarks/durable_throughput.py
	$(BIN)/python benchmarks/worker_concurrency.py
	$(BIN)/python benchmarks/postgres_throughput.py
