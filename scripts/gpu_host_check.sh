#!/usr/bin/env bash
# Check, on this CPU machine, that scripts/gpu_bench.sh runs with the GPU host's software.
#
# The lent H200 host has python 3.12 with torch 2.11, torchvision 0.26, transformers 5.17,
# matplotlib, tqdm, psutil, pytest and hypothesis, and nothing else (DEVELOPERS.md); our .venv
# has python 3.11 and torch 2.14.1. This builds a venv of the host's set only (default
# /tmp/h200env: PyPI's CUDA build of torch 2.11, ~4 GB, about a minute at registry speed), adds
# the wheels of scripts/fetch_gpu_wheels.sh the way gpu_bench.sh does on the host, and runs
# gpu_bench.sh with DEVICE=cpu at small sizes (whisper-tiny, 8192-token start-up, 4 requests)
# into a scratch folder. A missing package or an API change between the two torch versions
# shows up here as a failed command, before any GPU time is spent. About 6 to 10 minutes.
#
# Usage: scripts/gpu_host_check.sh            (ENV [/tmp/h200env], OUT [/tmp/gpu_host_check])
# Exit status: gpu_bench.sh's (0 when every benchmark wrote its JSON).
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
"$ENV/bin/python" -c "import sys, torch, torchvision, transformers
print('host-like env: python', sys.version.split()[0], '| torch', torch.__version__,
      '| torchvision', torchvision.__version__, '| transformers', transformers.__version__)"
compgen -G ".whl/*.whl" >/dev/null || bash scripts/fetch_gpu_wheels.sh
rm -rf /tmp/site "$OUT"   # gpu_bench.sh installs .whl into /tmp/site, as on a fresh host

PYTHON=$ENV/bin/python DEVICE=cpu OUT=$OUT ASR_MODEL=whisper-tiny STARTUP_LEN=8192 \
  STARTUP_REPEATS=1 NUM_REQUESTS=4 MAX_TOKENS=8 MAX_NUM_SEQS=4 BUDGET_S=900 \
  T_STARTUP=300 T_BUDGET=120 T_PAIRED=80 T_EB=80 T_WORKLOAD=60 \
  bash scripts/gpu_bench.sh
