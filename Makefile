# gsched — common tasks. Every target installs the virtual environment first if needed.
VENV   ?= .venv
PYTHON := $(VENV)/bin/python
PYTEST_FLAGS ?= -q

.PHONY: install demo test test-slow bench clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

## The main job on a built-in default: optimize small generated graphs and the SPEC example.
demo: install
	$(PYTHON) -m eval.demo

## The test suite (CPU, minutes). Slow tests are marked and skipped here.
test: install
	$(PYTHON) -m pytest $(PYTEST_FLAGS)

test-slow: install
	$(PYTHON) -m pytest $(PYTEST_FLAGS) -m slow

## Cost-model throughput and BRKGA 5K wall time; writes docs/benchmarks.md.
bench: install
	$(PYTHON) -m eval.bench_cost_model
	$(PYTHON) -m eval.bench_brkga

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
