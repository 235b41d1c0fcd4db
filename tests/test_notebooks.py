"""Every notebook runs headless in QUICK mode (papermill, the venv's python3 kernel)."""
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9]*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_quick(nb, tmp_path):
    from refimpl.report import execute
    out = execute(nb, tmp_path, {"QUICK": True, "DEVICE": "cpu", "OUT_DIR": str(tmp_path)},
                  timeout_s=600)
    assert out.exists() and out.with_suffix(".html").exists()
    assert list(tmp_path.glob("*.png")), "the notebook saved no figure"


def test_notebooks_committed_without_outputs():
    import nbformat
    for nb in NOTEBOOKS:
        node = nbformat.read(nb, as_version=4)
        tagged = [c for c in node.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{nb.name}: exactly one parameters cell"
        for c in node.cells:
            if c.cell_type == "code":
                assert not c.outputs and c.execution_count is None, f"{nb.name} carries outputs"
