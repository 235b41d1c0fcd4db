#!/usr/bin/env bash
# Download the wheels scripts/gpu_session.sh needs on a CUDA host that has no network.
#
# The GPU host's python3 (3.12) already has torch, transformers, tokenizers, numpy, pillow,
# tqdm and psutil; it may lack blake3 (the processing-cache hash), py-spy (profiles),
# espeakng-loader (only for regenerating speech clips), pyzmq (the two-process engine) and tyro
# with docstring-parser and typeguard (the `refimpl bench` command line). This fetches them as
# CPython 3.12 manylinux x86_64 wheels into ./.whl (git-ignored), pinned to the versions in this
# machine's .venv when it has them, so both machines hash and profile with the same code:
#
#   python3 -m pip download --only-binary=:all: --no-deps -d .whl \
#       --python-version 3.12 --implementation cp --abi cp312 \
#       --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux_2_28_x86_64 blake3==X py-spy==Y espeakng-loader==Z
#
# On the GPU host gpu_session.sh installs them with
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD
# (.whl is git-ignored: name it in the device runner's `carry` list so it travels.)
#
# Usage: scripts/fetch_gpu_wheels.sh [extra requirement ...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY=python3
[[ -x .venv/bin/python ]] && PY=.venv/bin/python

pkgs=()
for p in blake3 py-spy espeakng-loader pyzmq tyro docstring-parser typeguard; do
  v=$("$PY" -m pip show "$p" 2>/dev/null | sed -n 's/^Version: //p')
  pkgs+=("$p${v:+==$v}")
done
pkgs+=("$@")

rm -rf .whl && mkdir -p .whl
"$PY" -m pip download --only-binary=:all: --no-deps -d .whl \
  --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 \
  "${pkgs[@]}"
echo "fetched into .whl:"; ls -l .whl
