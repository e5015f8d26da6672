# The two commands of the README, and their parts.
#   make demo   set up .venv, then `paperports reproduce all --quick --jobs 2` (under 10 minutes)
#   make test   set up .venv, then tests, lint, types and the docs build
# TORCH picks the torch build: the default is the CPU wheel; for CUDA, for example
#   make test TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.paperports-installed

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export MPLBACKEND := Agg
export NO_MKDOCS_2_WARNING := 1

.PHONY: demo test setup pytest lint typecheck docs reproduce bench clean

demo: setup
	$(BIN)/paperports reproduce all --quick --jobs 2

test: setup pytest lint typecheck docs

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first: a plain `torch` requirement would pull the multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e ".[all,test,docs]"
	# the ecosystems' own test suites (their sdists' tests/): transformers' model tests, run
	# over our BERT and BN-LSTM, and sb3-contrib's recurrent-policy tests, over our policy
	$(BIN)/python tests/integrations/ecosystem_suites.py $(VENV)/ecosystem-tests
	touch $@

pytest:
	$(BIN)/python -m pytest -q --durations=20

lint:
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck:
	$(BIN)/mypy

docs:
	$(BIN)/mkdocs build --strict --quiet --site-dir site

reproduce: setup
	$(BIN)/python -m pytest -q -m slow
	$(BIN)/paperports reproduce all

bench: setup
	$(BIN)/paperports bench all

clean:
	rm -rf site reports .pytest_cache .mypy_cache .ruff_cache
