# gsched — common tasks. Every target installs the virtual environment first if needed.
VENV   ?= .venv
PYTHON := $(VENV)/bin/python
PYTEST_FLAGS ?= -q

.PHONY: install demo test test-slow bench results train clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e ".[test,eval,cpsat]"
	touch $@

install: $(VENV)/.installed

## The main job on a built-in default: optimize small generated graphs and the SPEC example.
demo: install
	$(PYTHON) -m eval.demo

## The test suite (CPU, minutes). Slow tests are marked and skipped here. Modules are spread
## over TEST_WORKERS processes (pytest-xdist; one per core, at most 4: each holds a few GB of
## compiled code); a module's tests stay in one process, which shares its fixtures and
## compilations. TEST_WORKERS=0: all in this process.
TEST_WORKERS ?= $(shell python3 -c "import os; print(min(4, len(os.sched_getaffinity(0))))")
XDIST = $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)
test: install
	$(PYTHON) -m pytest $(XDIST) $(PYTEST_FLAGS)

test-slow: install
	$(PYTHON) -m pytest $(XDIST) $(PYTEST_FLAGS) -m slow

## Train a REGAL runtime policy on built-in synthetic graphs (minutes on a CPU); run dir
## runs/regal_runtime_small, best policy exported to runs/regal_runtime_small/policy. ARGS: e.g.
## ARGS="--resume" or overrides.
train: install
	$(PYTHON) -m train.regal --config train/configs/regal_runtime_small.toml $(ARGS)

## Cost-model throughput and BRKGA 5K wall time (on one device, then with the batch split over
## one XLA device per CPU core); writes docs/benchmarks.md.
bench: install
	$(PYTHON) -m eval.bench_cost_model
	$(PYTHON) -m eval.bench_brkga
	$(PYTHON) -m eval.bench_brkga --shard

## Evaluation sweeps (eval/configs/*.toml) and their reports in docs/results/ (~30 min on a
## 2-core CPU; resumable: an interrupted `make results` continues where it stopped).
SWEEP_ENV ?=
results: install
	for name in synthetic moccasin; do \
	  $(SWEEP_ENV) $(PYTHON) -m eval.sweep --config eval/configs/$$name.toml --resume && \
	  $(PYTHON) -m eval.report runs/sweeps/$$name --out docs/results/$$name || exit 1; \
	done

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
