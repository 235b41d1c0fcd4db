"""The start-up study's views of a result without runs (slow: renders the figures; the other partial-result views are in tests/lab/studies/test_analysis_partial.py)."""

import matplotlib
import pytest

from tests.lab.studies.utils import _row, _with_runs

matplotlib.use("Agg")






@pytest.mark.slow
def test_startup_views_of_a_result_without_runs(tmp_path):
    from refimpl.lab.studies.startup import budget_figure, budget_table, ladder_figure, medians_table
    empty = _with_runs("startup_qwen2.5-vl-3b.json", {"0.8.5": 0, "0.9.0": 0}, interrupted=True)
    ladder_figure(empty, tmp_path)  # Ctrl-C in the warm-up: no run at all
    assert (tmp_path / "startup_ladder.png").exists()
    one = _with_runs("startup_qwen2.5-vl-3b.json", {"0.8.5": 2, "0.9.0": 0}, interrupted=True)
    fig = ladder_figure(one, tmp_path)
    assert "no runs of 0.9.0" in fig._suptitle.get_text()
    row = _row(medians_table(one), "0.9.0")
    assert "None" not in row and row == "| 0.9.0 | - | 0 | no runs | - | - | - | - | - | - |"
    budget = _with_runs("budget_qwen2.5-vl-3b.json", {"0.8.5": 2, "0.9.0": 0}, interrupted=True)
    assert _row(budget_table(budget), "0.9.0") == "| 0.9.0 | - | - | no runs |"
    fig = budget_figure(budget, tmp_path)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["call 1", "call 2"]
    budget_figure(_with_runs("budget_qwen2.5-vl-3b.json", {"0.8.5": 0}), tmp_path)
