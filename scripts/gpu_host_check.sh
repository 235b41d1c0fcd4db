#!/usr/bin/env bash
# Check, on this CPU machine, that the first GPU session's runs (benchmarks/gpu_session_serve.toml, then
# gpu_session_startup.toml) run with the GPU host's software (issue 48's session: scripts/gpu_session.sh, DRY=1).
#
# The lent H200 host has python 3.12 with torch 2.11, torchvision 0.26, transformers 5.17,
# matplotlib, tqdm, psutil, pytest and hypothesis, and nothing else (DEVELOPERS.md); our .venv
# has python 3.11 and torch 2.14.1. This builds a venv of the host's set only (default
# /tmp/h200env: PyPI's CUDA build of torch 2.11, ~4 GB, about a minute at registry speed), adds
# the wheels of scripts/fetch_gpu_wheels.sh the way gpu_session.sh does on the host, and runs
# the session's runs with device cpu at small sizes (whisper-tiny, 8192-token start-up, 4 requests:
# the two files below, written into $OUT, one run of each design of the session's files) into a scratch
# folder. A missing package or an API change between the two torch versions shows up here as a failed
# run, before any GPU time is spent. About 6 to 10 minutes.
#
# Usage: scripts/gpu_host_check.sh            (ENV [/tmp/h200env], OUT [/tmp/gpu_host_check])
# Exit status: the first failing sweep's (0 when every run wrote its Result).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ENV=${ENV:-/tmp/h200env}
OUT=${OUT:-/tmp/gpu_host_check}
PY312=${PY312:-$(command -v python3.12 || echo /root/.pyenv/versions/3.12.1/bin/python)}

if [[ ! -x $ENV/bin/python ]]; then
  "$PY312" -m venv "$ENV"
  "$ENV/bin/python" -m pip install -q torch==2.11.0 torchvision==0.26.0 transformers==5.17.0 \
    matplotlib tqdm psutil pytest hypothesis
fi
echo "host-like env: $("$ENV/bin/python" --version);" \
  $("$ENV/bin/pip" list 2>/dev/null | grep -iE '^(torch|torchvision|transformers) ' | tr -s ' ' | paste -sd, -)
compgen -G ".whl/*.whl" >/dev/null || bash scripts/fetch_gpu_wheels.sh
rm -rf /tmp/site "$OUT" && mkdir -p "$OUT"   # the wheels go into /tmp/site, as on a fresh host
"$ENV/bin/python" -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl

cat > "$OUT/serve.toml" <<'TOML'
experiment = "host-check-serve"
[base]
model = "whisper-tiny"
device = "cpu"
max_tokens = 8
max_num_seqs = 4
num_requests = 4
[[runs]]
name = "paired"
design = "paired"
variants = ["0.10.2", "0.10.2+#24866", "0.11.0"]
budget_s = 40
[[runs]]
name = "encoder-batch"
design = "paired"
against = "first"
variants = ["0.11.0", "audios-per-step@2"]
budget_s = 40
[[runs]]
name = "workload"
design = "workload"
repeats = 1
warmup_requests = 2
TOML
cat > "$OUT/startup.toml" <<'TOML'
experiment = "host-check-startup"
[base]
model = "qwen2.5-vl-3b"
device = "cpu"
repeats = 1
max_model_len = 8192
[[runs]]
name = "startup"
variants = ["0.8.5", "0.9.0", "0.11.1", "refimpl"]
[[runs]]
name = "budget"
variants = ["0.8.5", "0.9.0"]
calls = 2
TOML
export PYTHONPATH=/tmp/site:$PWD TOKENIZERS_PARALLELISM=false
for bench in serve startup; do
  "$ENV/bin/python" -m refimpl.lab.cli bench sweep "$bench" --params "$OUT/$bench.toml" --output-dir "$OUT"
done
