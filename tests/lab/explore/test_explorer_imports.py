"""Issue 44, the explorer page ready in under 5 s: the page imports no torch, transformers or
torchvision. Checked in fresh processes (a module imported once stays in ``sys.modules``), by
what is imported, never by a time: the page's own cells, read from notebooks/00_explore.ipynb."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from refimpl.lab.env import REPO_ROOT

NOTEBOOK = REPO_ROOT / "notebooks" / "00_explore.ipynb"
HEAVY = ("torch", "transformers", "torchvision")


def _cells() -> list[str]:
    """The notebook's code cells' sources, in order (the first is the parameters cell)."""
    nb = json.loads(NOTEBOOK.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _heavy_after(code: str) -> list[str]:
    """The HEAVY modules in ``sys.modules`` after ``code`` ran in a fresh interpreter, cwd notebooks/
    as voila runs the page (a failing ``code`` fails the test with its error)."""
    probe = code + f"\nimport sys, json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    out = subprocess.run([sys.executable, "-c", probe], cwd=NOTEBOOK.parent, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# ``gpu_device_node`` held False, as on a CPU machine: where a GPU driver's device node exists, the
# study asks torch for the GPU's name (its results folder: refimpl.lab.env.this_machine), by design.
NO_GPU_NODE = textwrap.dedent("""
    from IPython.display import display
    import refimpl.lab.env as env
    env.gpu_device_node = lambda: False
""")


def test_the_pages_import_cell_imports_no_torch_transformers_or_torchvision():
    """The parameters cell and the import cell (``from refimpl.lab.explore.explorer_panels import
    ExploreStudy`` and the study in stored mode), as the page's kernel runs them."""
    cells = _cells()
    assert "explorer_panels import ExploreStudy" in cells[1]
    assert _heavy_after(cells[0] + "\n" + cells[1].split("\n")[0]) == []  # the import alone
    assert _heavy_after(NO_GPU_NODE + cells[0] + "\n" + cells[1]) == []  # and the study


def test_the_whole_page_at_its_defaults_imports_none_of_them_either():
    """Every cell at the defaults (RECORD off): the chart's dry start-up plans through the real
    processing cache, registry and processing info, the Whisper panel, the closed comparison."""
    cells = _cells()
    assert any("study.explorer()" in c for c in cells) and any("comparison_panel" in c for c in cells)
    assert _heavy_after(NO_GPU_NODE + "\n".join(cells)) == []


@pytest.mark.parametrize("module", ["refimpl.multimodal", "refimpl.multimodal.cache", "refimpl.multimodal.parse",
                                    "refimpl.multimodal.inputs", "refimpl.multimodal.registry",
                                    "refimpl.multimodal.qwen2_5_vl_info", "refimpl.multimodal.whisper_info",
                                    "refimpl.multimodal.hash_paths", "refimpl.engine.startup_plan",
                                    "refimpl.lab.env", "refimpl.lab.bench.common", "refimpl.lab.bench.calibrate"])
def test_the_modules_the_page_reaches_import_no_torch(module):
    """Each module on the page's path, alone (a later import of torch elsewhere cannot hide one)."""
    assert _heavy_after(f"import {module}") == []
