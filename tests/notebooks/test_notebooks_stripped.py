"""The notebooks are committed without outputs (their runs are in tests/notebooks/test_notebooks.py)."""
import re
from pathlib import Path

import nbformat

NB_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("[0-9]*.ipynb"))


def test_notebooks_committed_without_outputs():
    for nb in NOTEBOOKS:
        node = nbformat.read(nb, as_version=4)
        tagged = [c for c in node.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{nb.name}: exactly one parameters cell"
        assert re.search(r'^MODE = "stored"', tagged[0].source, re.M), f"{nb.name}: MODE not stored"
        for c in node.cells:
            if c.cell_type == "code":
                assert not c.outputs and c.execution_count is None, f"{nb.name} carries outputs"
