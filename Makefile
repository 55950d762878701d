# Two commands on a fresh machine: `make chat` (the assistant in this terminal) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: chat run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

chat: $(STAMP)  ## talk to Anyy in this terminal (embedded SQLite store, in-process scheduler)
	$(BIN)/anyy chat

run: $(STAMP)  ## the resident process: every configured surface + the scheduler
	$(BIN)/anyy run

test: $(STAMP)  ## the whole test suite (starts its own local servers)
	$(BIN)/pytest

lint: $(STAMP)  ## ruff (packages, tests, bench) and mypy (the four packages): any finding fails
	@status=0; $(BIN)/ruff check . || status=1; $(BIN)/mypy || status=1; exit $$status  # both report, then fail

bench: $(STAMP)  ## the benchmarks in bench/, figures recorded in docs/benchmarks.md
	$(BIN)/python bench/turn_overhead.py
	$(BIN)/python bench/selection.py
	$(BIN)/python bench/automations.py
	$(BIN)/python bench/streaming.py
	$(BIN)/python bench/remind_phrases.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
