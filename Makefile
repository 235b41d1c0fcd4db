# refimpl: set up, test, measure, report.
#
#   make test          set up .venv if needed, then lint and run the test suite (soak tests skipped;
#                      2 pytest-xdist workers, PYTEST_WORKERS=N to change)
#   make lint          ruff (pyflakes, import order, bugbear) and mypy on refimpl/ (~1 s warm, ~12 s cold)
#   make report        set up, then run every notebook headless -> reports/latest/
#   make report-quick  the same with small sizes and few repeats
#   make soak          the long soak / fuzz tests only (pytest -m soak)
#   make lab           JupyterLab at the repository root, opening notebooks/ (the executed reports are
#                      under reports/; LAB_FLAGS=... adds flags; --allow-root as root)
#   make clean         remove reports and caches (keeps .venv); make distclean also drops .venv
#
# .venv is (re)installed only when pyproject.toml is newer than the stamp file, so a second
# `make test` starts pytest at once. Pins live in pyproject.toml (torch 2.14.1, torchvision
# 0.29.1, transformers 5.17.0); environment.yml mirrors them for conda users.

SHELL       := /bin/bash
PYTHON      ?= python3
VENV        := .venv
BIN         := $(VENV)/bin
STAMP       := $(VENV)/.refimpl-installed
PYTEST_ARGS ?=
# The fast suite runs on 2 pytest-xdist workers (one per core here; each test's torch uses one
# thread); PYTEST_WORKERS=0 runs it in one process, as `make soak` does.
PYTEST_WORKERS ?= 2

.PHONY: .venv setup lint test soak report report-quick lab clean distclean

.venv setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -e .
	@touch $@

lint: $(STAMP)
	$(BIN)/ruff check refimpl tests scripts
	$(BIN)/mypy

test: $(STAMP) lint
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

soak: $(STAMP)
	$(BIN)/python -m pytest -q -m soak $(PYTEST_ARGS)

report: $(STAMP)
	$(BIN)/refimpl report

report-quick: $(STAMP)
	$(BIN)/refimpl report --quick

# Jupyter refuses to start as root unless told --allow-root; containers and the GPU hosts
# run as root, so the flag is added there (and only there).
ALLOW_ROOT  := $(if $(filter 0,$(shell id -u)),--allow-root)
LAB_FLAGS   ?=

lab: $(STAMP)
	$(abspath $(BIN))/jupyter lab --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/notebooks \
		$(ALLOW_ROOT) $(LAB_FLAGS)

clean:
	rm -rf reports build .pytest_cache .hypothesis .mypy_cache .ruff_cache
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 \
		| xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV) *.egg-info
