#!/usr/bin/env bash
# The cost model's same-day benchmark (issue 30, docs/results.md "Predicted against measured, same day"):
# calibrate this machine, then the release rows at 128k and 50k tokens and at one fresh setting
# (65536 tokens, max_pixels 1003520: no committed run used it), each row 2 fresh processes,
# interleaved, one untimed warm-up start-up first; then the table of predicted against measured.
# One start-up at a time (128k needs up to ~18 GiB); run it on a quiet machine: ~35 min at
# 2026-12-02's speed. Usage: scripts/same_day_bench.sh [OUT_DIR]  (default results/<this machine>)
# LADDERS="128k" scripts/same_day_bench.sh re-measures only those ladders (after a fresh calibration);
# the table then reads every ladder of the day in OUT_DIR.
# It changes no system setting: each result records the free page reporting it finds
# (docs/cost-model.md "Memory the VM hands back to its host").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
REFIMPL=${REFIMPL:-.venv/bin/refimpl}
export OMP_NUM_THREADS=1
HW=$($PY -c "from refimpl.lab.env import hardware_folder, this_machine; print(hardware_folder(this_machine()))")
OUT=${1:-results/$HW}
DAY=$(date -u +%F)
LADDERS=${LADDERS:-128k 50k fresh-64k-maxpix}
ROWS=(0.8.5 0.9.0 0.9.2 0.10.2 0.11.0 0.11.1 0.13.0 refimpl shape-only)
mkdir -p "$OUT"
echo "# $(date -u +%FT%TZ) ladders: $LADDERS ($(git rev-parse --short HEAD))" >> "$OUT/same_day_$DAY.log"
t0=$(date +%s)
$REFIMPL bench calibrate --output-json "$OUT/calibration.json"
echo "calibrate: $(( $(date +%s) - t0 )) s wall" | tee -a "$OUT/same_day_$DAY.log"
$REFIMPL bench startup --variants 0.9.2 --repeats 1 --no-warmup --output-json "/tmp/same_day_warmup_$$.json"
run() {  # name, extra flags...
  local name=$1; shift
  [[ " $LADDERS " == *" $name "* ]] || return 0
  local t=$(date +%s)
  $REFIMPL bench startup --variants "${ROWS[@]}" --repeats 2 --no-warmup "$@" \
      --output-json "$OUT/startup_qwen2.5-vl-3b_release-rows_${name}_$DAY.json"
  echo "$name: $(( $(date +%s) - t )) s wall" | tee -a "$OUT/same_day_$DAY.log"
}
run 128k
run 50k --max-model-len 50000
run fresh-64k-maxpix --max-model-len 65536 --mm-processor-kwargs max_pixels 1003520
# the fresh setting after the full-size HF rates (2026-12-04): frames of ~6 MP, between the
# calibration's small (2.8 MP) and full-size (12.8 MP) frames; only when LADDERS names it
run fresh-96k-maxpix6m --max-model-len 96000 --mm-processor-kwargs max_pixels 6021120
# the fresh setting of the run with free page reporting off (2026-12-04 evening): frames of ~4 MP
run fresh-80k-maxpix4m --max-model-len 80000 --mm-processor-kwargs max_pixels 4014080
# and after the encoder's pairs were priced in a batch (the same evening): frames of ~3 MP
run fresh-72k-maxpix3m --max-model-len 72000 --mm-processor-kwargs max_pixels 3010560
$PY -m refimpl.lab.explore.cost_check --same-day "$OUT/calibration.json" \
    $(ls "$OUT"/startup_qwen2.5-vl-3b_release-rows_{128k,50k,fresh-64k-maxpix,fresh-96k-maxpix6m,fresh-80k-maxpix4m,fresh-72k-maxpix3m}_"$DAY".json 2>/dev/null) \
    | tee "$OUT/same_day_$DAY.md"
