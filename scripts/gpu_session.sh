#!/usr/bin/env bash
# The GPU session on a CUDA host without network (issue 48): host set-up, then two sweep files.
#
#   1. the pure-pip pieces the host lacks, as wheels in ./.whl (scripts/fetch_gpu_wheels.sh fetches them
#      here; name .whl in the device runner's `carry`), installed into /tmp/site; the repository is used
#      from the working tree (PYTHONPATH=$PWD), not pip-installed;
#   2. nvidia-smi's report into $OUT/nvidia-smi-<date>.txt (every Result records the rest of the machine in its env);
#   3. refimpl bench sweep serve   --params benchmarks/gpu_session_serve.toml    capped at SERVE_S [290] s
#      refimpl bench sweep startup --params benchmarks/gpu_session_startup.toml  capped at STARTUP_S [240] s
#      each into $OUT/<experiment>-<UTC date>/ (a Result per run, sweep.log, the file's copy). A cap sends
#      SIGINT first: the run in progress keeps what finished as NAME.partial.json; RESUME=1 goes on;
#   4. afterwards, on the lab machine: the Results to keep are copied into results/gpu-<name>/ (the folder
#      refimpl.lab.studies.gpu reads), then `refimpl report --summary-of results/gpu-<name>` (the host has no
#      papermill) writes its summary.md.
#
# Knobs [defaults]: OUT [reports/sweeps], SERVE_S [290], STARTUP_S [240]
# (scripts/gpu_bench.sh's per-command caps summed: 120 + 100 + 70 and 170 + 70), PYTHON [python3],
# DRY_RUN [0] (1: the sweeps' --dry-run, nothing installed or written), RESUME [0].
# Exit status: 0 when both sweeps finished every run, else the first failing sweep's.
set -uo pipefail   # no -e: a sweep stopped at its cap must not stop the other
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY=${PYTHON:-python3}
DRY_RUN=${DRY_RUN:-0}
OUT=${OUT:-reports/sweeps}
flags=(--output-dir "$OUT")
[[ $DRY_RUN == 1 ]] && flags+=(--dry-run)
[[ ${RESUME:-0} == 1 ]] && flags+=(--resume)

if [[ $DRY_RUN != 1 ]]; then
  if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \
      || echo "warning: installing .whl/*.whl failed; continuing with what is there"
  fi
  mkdir -p "$OUT"
  command -v nvidia-smi >/dev/null && nvidia-smi > "$OUT/nvidia-smi-$(date -u +%F).txt" 2>&1
fi
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

rc=0
for part in serve:${SERVE_S:-290} startup:${STARTUP_S:-240}; do
  bench=${part%%:*} cap=${part##*:} folder="$OUT/gpu-session-${part%%:*}-$(date -u +%F)"
  echo "== gpu session: $bench sweep (cap ${cap}s) -> $folder"
  timeout --signal=INT --kill-after=15 "$cap" \
    "$PY" -m refimpl.lab.cli bench sweep "$bench" --params "benchmarks/gpu_session_$bench.toml" "${flags[@]}"
  status=$?
  (( rc != 0 )) || rc=$status
done
exit "$rc"
