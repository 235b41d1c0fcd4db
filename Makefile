# refimpl: set up, test, measure, report.
#
#   make test          set up .venv if needed, then lint and run every room (soak tests skipped;
#                      2 pytest-xdist workers, PYTEST_WORKERS=N to change; every skip printed with its
#                      reason, -rs: the browser test names `make browser-deps`)
#   make lint          ruff (pyflakes, import order, bugbear), mypy on refimpl/ (~1 s warm, ~12 s cold)
#                      and the import contract (tests/test_import_contract.py)
#   make user-tests    build the wheel, install it with the core dependencies only into a fresh venv
#                      and run examples/user_tests from a folder outside the source tree
#   make test-ends     both ends of the declared dependency ranges, side by side, each in a fresh
#                      venv of the core dependencies and the weights extra (no lab package): newest (no constraints) and lowest (pyproject's lower bounds,
#                      scripts/lowest_constraints.py); examples/user_tests and the engine tests in
#                      each, resolved versions printed (scripts/test_ends.sh)
#   make test-fast     the quick gate before a push (under a minute on a quiet machine): the mechanism's
#                      rooms and the public testing API (GATE_ROOMS: tests/core, tests/multimodal,
#                      tests/engine, tests/worker, tests/testing and tests/test_*.py, the repository
#                      checks) without the `slow` cases; no lint
#   make test-lab      the lab's rooms (tests/lab/*: bench, cli, conform, docs_gen, explore, probes,
#                      studies), the docs checks (tests/docs) and the notebooks (tests/notebooks),
#                      slow cases included
#   make test-slow     the `slow` cases of every room (-m slow): engines at real size, fresh
#                      processes, state machines; test-fast + test-slow cover the mechanism's rooms
#   make report        set up, then run every notebook headless -> reports/latest/
#   make report-quick  the same with small sizes and few repeats
#   make soak          the long soak / fuzz tests only (pytest -m soak; tests/soak and soak cases
#                      in the other rooms)
#   make lab           JupyterLab at the repository root, opening notebooks/ (the executed reports are
#                      under reports/; LAB_FLAGS=... adds flags; --allow-root as root)
#   make explore       notebooks/00_explore.ipynb as a standalone page (voila, 127.0.0.1:8866), with
#                      notebooks/voila.json: a closed tab shuts its kernel (voila's shutdown beacon
#                      carries no _xsrf token, so the page's server, on 127.0.0.1 only, does not
#                      check one) and kernels idle 5 minutes with no tab open are culled
#   make calibrate     the cost model's rates on this machine (run it on a quiet machine, goal 90 s:
#                      docs/cost-model.md "The rates"; peaks near 5 GiB, taken under /tmp/refimpl-bigmem.lock)
#                      -> results/<hardware>/calibration.json; make cost-check prints the
#                      predicted-against-measured table of the committed start-up and budget runs
#   make conformance  VLLM=0.11.0: real vLLM's profiling code against the rows (a ~10 GB side venv;
#                      VLLM_PYTHON=PATH checks your own vLLM build instead; docs/conformance.md)
#   make browser-deps  apt-get installs Debian's chromium and chromium-driver where missing: the
#                      explorer's real-browser test (tests/notebooks/test_explorer_browser.py, part of
#                      `make test`) drives them through selenium; .ci/run runs this first, and under
#                      CI=true the test fails instead of skipping when they are missing
#   make clean         remove reports and caches (keeps .venv); make distclean also drops .venv
#
# .venv gets `pip install -c constraints.txt -e ".[lab,weights]"`: the core dependencies as
# pyproject.toml's ranges, the lab and weights extras, every version pinned by constraints.txt
# (torch 2.14.1, torchvision 0.29.1, transformers 5.17.0; environment.yml installs the same).
# It is (re)installed only when pyproject.toml or constraints.txt is newer than the stamp file,
# so a second `make test` starts pytest at once.

SHELL       := /bin/bash
PYTHON      ?= python3
VENV        := .venv
BIN         := $(VENV)/bin
STAMP       := $(VENV)/.refimpl-installed
CONSTRAINTS := constraints.txt
PYTEST_ARGS ?=
# The fast suite runs on 2 pytest-xdist workers (one per core here; each test's torch uses one
# thread), a whole test file per worker (--dist loadfile: a module fixture, often an engine
# start-up, is built once instead of on both workers); PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2
# Tests by room (tests/ mirrors refimpl/, docs/testing.md "Where the tests are"): the gate is the
# mechanism's rooms and the public testing API; the lab's rooms, the docs and the notebooks have
# their own target; tests/soak runs with `make soak`.
GATE_ROOMS  := $(wildcard tests/test_*.py) tests/core tests/multimodal tests/engine tests/worker tests/testing
LAB_ROOMS   := tests/lab tests/docs tests/notebooks

.PHONY: .venv setup lint test test-fast test-lab test-slow torch-target user-tests test-ends soak report report-quick lab explore calibrate cost-check conformance \
	browser-deps clean distclean

.venv setup: $(STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -c $(CONSTRAINTS) -e ".[lab,weights]"
	@touch $@

# The import contract as a test (no extra tool): the mechanism never imports the measuring
# half, and needs only the core dependencies.
lint: $(STAMP)
	$(BIN)/ruff check refimpl tests scripts examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 0 -p no:cacheprovider tests/test_import_contract.py

test: $(STAMP) lint
	$(BIN)/python -m pytest -q -rs -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -rs -n $(PYTEST_WORKERS) --dist loadfile -m "not slow and not soak" $(PYTEST_ARGS) $(GATE_ROOMS)

test-lab: $(STAMP)
	$(BIN)/python -m pytest -q -rs -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS) $(LAB_ROOMS)

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -rs -n $(PYTEST_WORKERS) --dist loadfile -m "slow and not soak" $(PYTEST_ARGS)
# The outside-the-tree check: examples/user_tests against the built wheel, non-editable, in a
# venv of the core dependencies only (+ pytest and hypothesis, the user's own test tools),
# run from $(USER_DIR), versions as constraints.txt pins them. The venv sees a torch of its
# own, as a user's environment has one: torch and torchvision with their dependencies,
# installed once from the wheels on this disk into $(USER_TORCH) (a .pth file points the
# venv at it; pip counts it as installed and leaves it), reused by later runs: copying the
# 4-5 GB of CUDA libraries is what makes a cold install take minutes. pip's cache serves the
# other downloads of a second run. USER_TORCH= installs torch into the venv itself instead.
USER_VENV   ?= /tmp/refimpl-user-venv
USER_DIR    ?= /tmp/refimpl-user-tests
USER_TORCH  ?= /tmp/refimpl-user-torch-$(shell grep -E '^torch(vision)?==' $(CONSTRAINTS) | sed 's/==//' | paste -sd- -)
USER_WHEEL  := build/wheel

# The shared torch target (torch and torchvision as constraints.txt pins them, with their CUDA
# libraries), built once; user-tests, test-ends and .ci/run's fresh .venv point at it.
torch-target:
	test -d $(USER_TORCH)/torch || { rm -rf $(USER_TORCH).tmp && \
		$(PYTHON) -m pip install -q --no-compile --target $(USER_TORCH).tmp -c $(CONSTRAINTS) torch torchvision && \
		mv $(USER_TORCH).tmp $(USER_TORCH); }
	@echo $(USER_TORCH)

user-tests:
	rm -rf $(USER_WHEEL) $(USER_VENV) $(USER_DIR)
	$(PYTHON) -m pip wheel -q --no-deps -w $(USER_WHEEL) .
	$(if $(USER_TORCH),$(MAKE) --no-print-directory torch-target)
	$(PYTHON) -m venv $(USER_VENV)
	$(if $(USER_TORCH),echo $(USER_TORCH) > $$($(USER_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/user_torch.pth)
	@t0=$$(date +%s); $(USER_VENV)/bin/python -m pip install -q -c $(CONSTRAINTS) $(USER_WHEEL)/refimpl-*.whl \
		&& echo "user-tests: core install in $$(( $$(date +%s) - t0 )) s, venv $$(du -sh $(USER_VENV) | cut -f1)$(if \
		$(USER_TORCH), + torch $$(du -sh $(USER_TORCH) | cut -f1))"
	$(USER_VENV)/bin/python -m pip install -q -c $(CONSTRAINTS) pytest hypothesis
	$(USER_VENV)/bin/python -m pip show refimpl | grep -E '^(Version|Location|Requires):'
	@echo "user-tests: $$($(USER_VENV)/bin/python -m pip list 2>/dev/null | tail -n +3 | wc -l) packages"
	@! $(USER_VENV)/bin/python -m pip list 2>/dev/null | grep -iE '^(jupyterlab|papermill|pytest-xdist|mypy|ruff|py-spy) ' \
		|| { echo "user-tests: a lab package is in the core venv"; exit 1; }
	cp -r examples/user_tests $(USER_DIR)
	cd $(USER_DIR) && $(USER_VENV)/bin/python -m pytest -q -rs

test-ends:
	PYTHON=$(PYTHON) scripts/test_ends.sh

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

explore: $(STAMP)
	$(BIN)/voila notebooks/00_explore.ipynb --Voila.ip=127.0.0.1 --port=8866 --no-browser --Voila.config_file_paths=notebooks

calibrate: $(STAMP)
	flock /tmp/refimpl-bigmem.lock $(BIN)/refimpl bench calibrate

cost-check: $(STAMP)
	$(BIN)/refimpl cost-check

# Real vLLM's profiling code against the rows (docs/conformance.md): a side venv of ~10 GB under
# ~/.cache/refimpl/conform (3-11 min to install, one at a time), the probe 2-7 min under the
# big-memory lock. Not part of make test or .ci/run. VLLM=0.11.0 (a line of pins.tsv), or
# VLLM_PYTHON=/path/to/python for an interpreter with your own vLLM build; CONFORM_FLAGS=--keep ...
VLLM ?=
VLLM_PYTHON ?=
CONFORM_FLAGS ?=
conformance: $(STAMP)
	@test -n "$(VLLM)$(VLLM_PYTHON)" || { echo "make conformance VLLM=0.11.0 (or VLLM_PYTHON=/path/to/python)"; exit 2; }
	$(BIN)/refimpl conform $(if $(VLLM_PYTHON),--vllm-python $(VLLM_PYTHON),--vllm $(VLLM)) $(CONFORM_FLAGS)

# sudo only where not root; nothing is installed when both are on PATH already.
SUDO        := $(if $(filter 0,$(shell id -u)),,sudo)

browser-deps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null \
		&& echo "browser-deps: chromium and chromedriver present" \
		|| { $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends chromium chromium-driver; }

clean:
	rm -rf reports build .pytest_cache .hypothesis .mypy_cache .ruff_cache
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 \
		| xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV) *.egg-info
