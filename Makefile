# saga-dspy: `make eval` (set up + run the main job on the embedded defaults), `make test` (set up, `make lint`, run the
# suite), `make lint` (ruff check, ruff format --check, mypy).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Offline defaults: no cost-map download, no hub access. (MLflow trace export stays asynchronous:
# the tracker flushes it at the end of every run, so the exit is not delayed.)
export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1

EVAL_ARGS ?= --dataset qald10 --split test --limit 5

.PHONY: eval test lint setup local-model store bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --disable-pip-version-check -q --upgrade pip
	$(BIN)/pip install --disable-pip-version-check -q -e '.[test]'
	touch $@

setup: $(VENV)/.installed

$(VENV)/.local-model: $(VENV)/.installed scripts/install_local_model.sh
	bash scripts/install_local_model.sh $(VENV)
	touch $@

local-model: $(VENV)/.local-model

store: $(VENV)/.installed
	$(BIN)/python -m saga_dspy.kg build

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: $(VENV)/.installed lint
	$(BIN)/python -m pytest -q

eval: $(VENV)/.local-model store
	$(BIN)/python -m saga_dspy.eval $(EVAL_ARGS)

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_store.py

clean:
	rm -rf $(VENV) .cache .pytest_cache
