"""The dry start-up plan and the explorer page's first answer import none of transformers' or
torchvision's modules (issue 44: the page's ready time is mostly imports): parameter bytes come from
config.json (refimpl/worker/model_size.py), Qwen2.5-VL's sizes from qwen2_5_vl_info.py. The page
imports no torch either (tests/lab/explore/test_explorer_imports.py)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_plans_and_the_pages_first_answer_import_no_transformers_module():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "engine" / "dry_plan_child.py")], cwd=ROOT / "notebooks",
                         env=env, capture_output=True, text=True, timeout=600, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.slow
def test_the_engines_check_phase_builds_no_model_and_imports_no_processor_module():
    """The engine's check phase (check_startup_memory: refimpl's RAM refusal, in no release) reads the
    dry plan and nothing more: no meta-device model, no processor module. The imports a release pays
    fall where it paid them (runner_init builds the HF processor, load_model the model), so the check
    is not inside what start-up measures beyond its own arithmetic."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "engine" / "check_phase_child.py")], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=600, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"before": [], "after": []}
