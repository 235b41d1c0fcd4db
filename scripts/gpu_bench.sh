#!/usr/bin/env bash
# One prepared benchmark pass on a CUDA host, under ~9 minutes of wall time in total.
#
# The host's python3 already has torch + transformers 5.17 (+ tokenizers, numpy, pillow, tqdm,
# psutil) and no network. Missing pure-pip pieces travel as wheels in ./.whl (fetch them here
# with scripts/fetch_gpu_wheels.sh) and are installed into /tmp/site. The repository itself is
# used from the working tree (PYTHONPATH=$PWD), not pip-installed.
#
# Writes into ${OUT:-results/<gpu-name-slug>}, in this order (Whisper first: the registry call's
# share of a GPU step is what no CPU run can show):
#   env.json, nvidia-smi.txt                  machine, driver, library versions
#   paired.json       bench serve --design paired  whisper-large-v3 0.10.2, 0.10.2+#24866,
#                     0.11.0, fixed time (T_PAIRED): the GPU points of notebook 02's model curve
#   startup.json      bench startup  qwen2.5-vl-3b  STARTUP_VARIANTS [0.8.5 0.9.0 0.11.1 refimpl],
#                     STARTUP_REPEATS fresh processes each at STARTUP_LEN [50000] tokens, one
#                     untimed warm-up each unless STARTUP_WARMUP=0 (128000 tokens fits the window
#                     only with STARTUP_REPEATS=1 STARTUP_WARMUP=0)
#   encoder_batch.json  bench serve --design paired  0.11.0 vs audios-per-step@2,4,8
#                     (the next bottleneck after vLLM #24946; a what-if, not PR #29421), fixed time
#   workload.json     bench serve --design workload  the engine against transformers' generate()
#                     in static batches, WORKLOAD_PAIRS pairs E H H E
#   budget.json       bench startup --calls 2  qwen2.5-vl-3b  0.8.5, 0.9.0 at BUDGET_LEN [50000]
#                     (the reviewer's experiment)
#   throughput.json, throughput_hf.json  (only with ONLY=...) bench serve (design fresh): the first
#                     stage's fresh-process runs and transformers' generate()
#   <name>.log        each command's stdout/stderr
# and prints one summary line per JSON. Every command runs under `timeout` (SIGINT first, so
# the driver writes the repeats finished so far, then SIGKILL) with a cap that also respects
# the overall budget, so one hang cannot eat the others' time.
#
# Environment knobs (defaults in brackets): OUT, BUDGET_S [530] total seconds,
# DEVICE [cuda], REPEATS [3], STARTUP_VARIANTS, STARTUP_REPEATS [2], STARTUP_LEN [50000], STARTUP_WARMUP [1],
# BUDGET_LEN [50000], NUM_REQUESTS [32], MAX_TOKENS [32], MAX_NUM_SEQS [16],
# T_STARTUP [170], T_BUDGET [70], T_PAIRED [120], T_EB [100], T_WORKLOAD [70], WORKLOAD_PAIRS [2],
# T_THROUGHPUT [180], T_HF [60]
# per-command caps (s; a paired run's --budget-s is its cap minus 40 s of engine builds),
# ONLY ["startup budget paired encoder_batch workload"] subset to run, DRY_RUN [0] print only (the
# commands, and the results folder named from nvidia-smi or results/<gpu-name>/; writes nothing),
# PYTHON [python3], VL_MODEL [qwen2.5-vl-3b], ASR_MODEL [whisper-large-v3] (smaller models only for a
# CPU smoke run of the script itself, scripts/gpu_host_check.sh).
#
# Exit status: 0 if every selected command finished (exit 0) and wrote its JSON; 1 otherwise (a
# command stopped at its cap still leaves the JSON of the runs it finished).
set -uo pipefail   # no -e: one failing benchmark must not stop the others
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-530}
DEVICE=${DEVICE:-cuda}
REPEATS=${REPEATS:-3}
NUM_REQUESTS=${NUM_REQUESTS:-32}
MAX_TOKENS=${MAX_TOKENS:-32}
MAX_NUM_SEQS=${MAX_NUM_SEQS:-16}
ONLY=${ONLY:-"startup budget paired encoder_batch workload"}
DRY_RUN=${DRY_RUN:-0}
START=$SECONDS

# ---- missing packages from ./.whl ----------------------------------------------------------
if compgen -G ".whl/*.whl" >/dev/null && [[ $DRY_RUN != 1 ]]; then
  "$PY" -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \
    || echo "warning: installing .whl/*.whl failed; continuing with what is there"
fi
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
export PATH=/tmp/site/bin:$PATH
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

# ---- output folder named after the GPU, as refimpl.lab.env.hardware_folder names it ---------
smi_name() { command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1; }
slug() { tr '[:upper:]' '[:lower:]' | sed -E 's/[^a-z0-9]+/-/g; s/^-+|-+$//g'; }
folder() {  # gpu-nvidia-h200 on an H200; the CPU's folder (cpu-amd-epyc-2c) on a CPU-only host
  "$PY" -c "from refimpl.lab.env import hardware_folder, this_machine; print(hardware_folder(this_machine()))" 2>/dev/null \
    || { n=$(smi_name | slug); echo "${n:+gpu-$n}"; } | grep . || echo unknown
}
if [[ $DRY_RUN == 1 ]]; then
  # A dry run creates nothing and names the folder a CUDA host would get: this machine's GPU
  # when nvidia-smi names one, else a placeholder (not the CPU folder a GPU-less run gets).
  DRY_GPU=$(smi_name | slug)
  OUT=${OUT:-results/${DRY_GPU:+gpu-$DRY_GPU}}
  [[ $OUT == results/ ]] && OUT="results/<gpu-name>"
  echo "gpu_bench (dry run, nothing written): would write to $OUT/ (budget ${BUDGET_S}s, device $DEVICE)"
else
  OUT=${OUT:-results/$(folder)}
  mkdir -p "$OUT"
  echo "gpu_bench: writing to $OUT (budget ${BUDGET_S}s, device $DEVICE)"
fi

if [[ $DRY_RUN != 1 ]]; then
  command -v nvidia-smi >/dev/null && nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
  "$PY" -c "import sys; from refimpl.lab.bench.common import write_json; from refimpl.lab.env import collect_env; write_json(sys.argv[1], collect_env())" \
    "$OUT/env.json" || echo "warning: env.json not written"
  "$PY" -c "import blake3, tqdm, psutil, torch, transformers; print('torch', torch.__version__, '| transformers', transformers.__version__, '| cuda', torch.cuda.is_available())" \
    || echo "warning: a required package is missing (see .whl / scripts/fetch_gpu_wheels.sh)"
fi

# ---- one summary line per result JSON ------------------------------------------------------
summarize() {
  "$PY" - "$1" <<'PY'
import json, sys
path = sys.argv[1]
try:
    doc = json.load(open(path))
except Exception as e:  # noqa: BLE001 - a summary must never stop the script
    print(f"   {path}: unreadable ({e})"); sys.exit(0)
env = doc.get("env") or {}
hw = (env.get("hardware") or {}).get("name", "?")
parts = []
for v, r in (doc.get("variants") or {}).items():  # the schema of refimpl/lab/bench/schema.py
    heads = [f"{k}={m['median']:.4g}" for k, m in r.get("summary", {}).items() if isinstance(m, dict)]
    parts.append(f"{v}: {' '.join(heads) or 'no result'} (n={len(r.get('runs') or [])})")
print(f"   {path.rsplit('/', 1)[-1]} [{env.get('device', '?')}, {hw}] " + " | ".join(parts))
PY
}

FAILED=0
run() {  # run NAME CAP_S ARGS... : refimpl.lab.cli ARGS --output-json $OUT/NAME.json under a timeout
  local name=$1 cap=$2; shift 2
  [[ " $ONLY " == *" $name "* ]] || return 0
  local left=$(( BUDGET_S - (SECONDS - START) - 20 ))
  local cmd=("$PY" -m refimpl.lab.cli "$@" --output-json "$OUT/$name.json")
  if [[ $DRY_RUN == 1 ]]; then echo "[dry-run, cap ${cap}s] ${cmd[*]}"; return 0; fi
  if (( left < 30 )); then echo "== $name: SKIPPED, ${left}s of the budget left"; FAILED=1; return 0; fi
  (( cap > left )) && cap=$left
  echo "== $name (cap ${cap}s): ${cmd[*]}"
  local t0=$SECONDS rc
  rm -f "$OUT/$name.json"
  timeout --signal=INT --kill-after=15 "$cap" "${cmd[@]}" > "$OUT/$name.log" 2>&1
  rc=$?
  echo "   exit $rc after $(( SECONDS - t0 ))s$([[ $rc == 124 ]] && echo ' (timed out: partial results, if any)')"
  if [[ -s $OUT/$name.json ]]; then
    summarize "$OUT/$name.json"
  else
    FAILED=1
    echo "   no JSON; last lines of $OUT/$name.log:"; tail -n 8 "$OUT/$name.log" | sed 's/^/   | /'
  fi
  [[ $rc == 0 ]] || FAILED=1
}

VL=${VL_MODEL:-qwen2.5-vl-3b}
ASR=${ASR_MODEL:-whisper-large-v3}
# Whisper first: the registry call's share of a GPU step is what a CPU run cannot show.
T_PAIRED=${T_PAIRED:-120}; T_EB=${T_EB:-100}
run paired "$T_PAIRED" bench serve --design paired --model $ASR \
  --variants 0.10.2 "0.10.2+#24866" 0.11.0 --budget-s $(( T_PAIRED - 40 )) \
  --num-requests "$MAX_NUM_SEQS" --max-tokens "$MAX_TOKENS" --max-num-seqs "$MAX_NUM_SEQS" --device "$DEVICE"
read -r -a STARTUP_ROWS <<< "${STARTUP_VARIANTS:-0.8.5 0.9.0 0.11.1 refimpl}"
WARM=--warmup; [[ ${STARTUP_WARMUP:-1} == 1 ]] || WARM=--no-warmup
run startup "${T_STARTUP:-170}" bench startup --model $VL \
  --variants "${STARTUP_ROWS[@]}" --device "$DEVICE" $WARM \
  --repeats "${STARTUP_REPEATS:-2}" --max-model-len "${STARTUP_LEN:-50000}"
run encoder_batch "$T_EB" bench serve --design paired --model $ASR --against first \
  --variants 0.11.0 audios-per-step@2 audios-per-step@4 audios-per-step@8 --budget-s $(( T_EB - 40 )) \
  --num-requests "$MAX_NUM_SEQS" --max-tokens "$MAX_TOKENS" --max-num-seqs "$MAX_NUM_SEQS" --device "$DEVICE"
run workload "${T_WORKLOAD:-70}" bench serve --design workload --model $ASR \
  --repeats "${WORKLOAD_PAIRS:-2}" --num-requests "$NUM_REQUESTS" --max-tokens "$MAX_TOKENS" \
  --max-num-seqs "$MAX_NUM_SEQS" --device "$DEVICE" --warmup-requests 2
run budget "${T_BUDGET:-70}" bench startup --model $VL --variants 0.8.5 0.9.0 --calls 2 \
  --device "$DEVICE" --repeats 2 --max-model-len "${BUDGET_LEN:-50000}"
run throughput "${T_THROUGHPUT:-180}" bench serve --model $ASR \
  --variants 0.10.2 "0.10.2+#24866" 0.11.0 --device "$DEVICE" --repeats "$REPEATS" \
  --num-requests "$NUM_REQUESTS" --max-tokens "$MAX_TOKENS" --max-num-seqs "$MAX_NUM_SEQS" \
  --warmup-requests 2
run throughput_hf "${T_HF:-60}" bench serve --model $ASR --variants hf-generate --device "$DEVICE" \
  --repeats "$REPEATS" --num-requests "$NUM_REQUESTS" --max-tokens "$MAX_TOKENS" \
  --max-num-seqs "$MAX_NUM_SEQS" --warmup-requests 2

[[ $DRY_RUN == 1 ]] && { echo "gpu_bench: dry run done; a real run writes to $OUT/"; exit 0; }
echo "gpu_bench: done in $(( SECONDS - START ))s; results in $OUT"
exit $FAILED
