#!/usr/bin/env bash
# What the VM's free page reporting costs a start-up, paired in one run: the same rows with the kernel's
# reporting on (its default, after 20 s idle) and off (scripts/page_reporting.sh: free memory touched once),
# in the order on, off, off, on; one fresh process per row and round. Root; restores the setting on exit.
# Usage: scripts/page_reporting_ab.sh OUT_DIR [ROW ...]   (default rows: 0.8.5 0.11.1, at 128k tokens)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
REFIMPL=${REFIMPL:-.venv/bin/refimpl}
OUT=$1; shift
ROWS=("$@")
[[ ${#ROWS[@]} -gt 0 ]] || ROWS=(0.8.5 0.11.1)
source scripts/page_reporting.sh
mkdir -p "$OUT"
k=0
for mode in on off off on; do
  k=$((k + 1))
  "reporting_$mode"
  $REFIMPL bench startup --variants "${ROWS[@]}" --repeats 1 --no-warmup \
      --output-json "$OUT/startup_qwen2.5-vl-3b_reporting-${mode}_$k.json" > /dev/null
done
$PY -c "import sys; from refimpl.lab.studies.startup_tables import reporting_ab_table; print(reporting_ab_table(sys.argv[1]))" "$OUT"
