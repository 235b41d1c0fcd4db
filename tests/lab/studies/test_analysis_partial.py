"""The notebooks' tables and figures on partial results (a variant without runs) and on too few
runs a side to call a comparison resolved (refimpl.lab.stats.MIN_PAIRS). Synthetic Results
built from the committed ones: no benchmark runs here."""

import matplotlib
import pytest

from refimpl.lab.bench.schema import Result
from refimpl.lab.stats import MIN_PAIRS
from tests.lab.studies.utils import STORED, _row, _with_runs

matplotlib.use("Agg")
NOT_RESOLVED = f"not resolved (< {MIN_PAIRS} runs a side)"






def test_throughput_summary_labels_gains_from_too_few_runs_and_missing_sides(tmp_path):
    from refimpl.lab.studies.throughput import summary_md
    two = summary_md(_with_runs("throughput_whisper-tiny.json",
                                {"0.10.2": 2, "0.10.2+#24866": 2, "0.11.0": 2}), tmp_path)
    assert _row(two, "0.10.2+#24866 / 0.10.2").endswith("| - | - | not shown (2 runs a side; 5 needed) |")
    five = summary_md(_with_runs("throughput_whisper-tiny.json", {v: MIN_PAIRS for v in
                                 ("0.10.2", "0.10.2+#24866", "0.11.0")}), tmp_path)
    assert _row(five, "0.10.2+#24866 / 0.10.2").endswith(("| resolved |", "| unresolved (interval holds 1) |"))
    part = summary_md(_with_runs("throughput_whisper-tiny.json",
                                 {"0.10.2": 2, "0.10.2+#24866": 0, "0.11.0": 2},
                                 interrupted=True), tmp_path)
    assert "nan" not in part and "**Partial result**" in part
    assert _row(part, "0.10.2+#24866 / 0.10.2").endswith("| - | - | no runs of 0.10.2+#24866 |")
    assert _row(part, "0.11.0 / 0.10.2+#24866").endswith("| no runs of 0.10.2+#24866 |")


@pytest.mark.parametrize("n", [2, MIN_PAIRS])
def test_call1_ratio_states_resolution(n):
    from refimpl.lab.studies.startup import call1_ratio
    budget = _with_runs("budget_qwen2.5-vl-3b.json", {"0.8.5": n, "0.9.0": n})
    for i, run in enumerate(budget.runs("0.9.0")):
        run["calls_s"][0] = 20.0 + 0.1 * i
    for i, run in enumerate(budget.runs("0.8.5")):
        run["calls_s"][0] = 10.0 + 0.1 * i
    assert call1_ratio(budget)["state"] == (NOT_RESOLVED if n < MIN_PAIRS else "resolved")


def test_memory_table_row_without_runs():
    from refimpl.lab.studies.startup_tables import memory_table
    assert _row(memory_table({"v0.9.0 (this run)": {"runs": []}}), "v0.9.0").endswith("| no runs |")


def test_in_process_runs_are_never_called_fresh_processes():
    from refimpl.lab.studies import provenance
    from refimpl.lab.studies.startup import summary_md
    res = Result.load(STORED / "startup_qwen2.5-vl-3b.json")
    assert "fresh processes" in provenance(res) and "3 fresh-process runs" in summary_md(res)
    res.env["in_process"] = True
    text = summary_md(res)
    assert "fresh" not in text and "one process" in text and "Medians of 3 in-process runs" in text
