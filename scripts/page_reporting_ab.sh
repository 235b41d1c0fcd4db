#!/usr/bin/env bash
# What the VM's free page reporting costs a start-up, paired in one run: the same rows with the kernel's
# reporting on (its default, after 20 s idle) and off (page_reporting_order 11, free memory touched once),
# in the order on, off, off, on; one fresh process per row and round. Root; restores the setting on exit.
# Usage: scripts/page_reporting_ab.sh OUT_DIR [ROW ...]   (default rows: 0.8.5 0.11.1, at 128k tokens)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=$1; shift
ROWS=("${@:-0.8.5 0.11.1}")
P=/sys/module/page_reporting/parameters/page_reporting_order
old=$(cat $P)
trap 'echo "$old" > '"$P" EXIT
mkdir -p "$OUT"
k=0
for mode in on off off on; do
  k=$((k + 1))
  if [[ $mode == off ]]; then
    echo 11 > $P
    $PY -c "
import numpy as np, psutil
keep = []
while psutil.virtual_memory().available > 3 * 2**30:
    keep.append(np.full(2**27, 1, dtype=np.int64))"
  else
    echo "$old" > $P
    sleep 20
  fi
  .venv/bin/refimpl bench startup --variants ${ROWS[@]} --repeats 1 --no-warmup \
      --output-json "$OUT/startup_qwen2.5-vl-3b_reporting-${mode}_$k.json" > /dev/null 2>&1
done
$PY - "$OUT" <<'PY'
import glob, json, statistics, sys
runs = {}
for f in sorted(glob.glob(f"{sys.argv[1]}/startup_*_reporting-*.json")):
    mode = f.rsplit("reporting-", 1)[1].split("_")[0]
    for v, x in json.load(open(f))["variants"].items():
        for r in x["runs"]:
            runs.setdefault(v, {}).setdefault(mode, []).append(r["total_s"])
print("| row | reporting on: s | reporting off: s | on / off (median) |\n|---|---|---|---|")
for v, m in runs.items():
    on, off = m.get("on", []), m.get("off", [])
    print(f"| {v} | {', '.join(f'{s:.1f}' for s in on)} | {', '.join(f'{s:.1f}' for s in off)} | "
          f"{statistics.median(on) / statistics.median(off):.2f}x |")
PY
