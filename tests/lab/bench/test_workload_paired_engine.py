"""The engine and HF generate paired in one process (the workload's logic is in tests/lab/bench/test_workload_paired.py)."""

import pytest

from refimpl.lab.bench import trial
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import HF, ServeSpec


@pytest.mark.slow
def test_engine_and_generate_paired_in_one_process(tmp_path):
    """Design workload, E H H E: the same requests and the same greedy tokens on both sides (EOS
    stops), CPU seconds per run, both comparisons with their intervals; two pairs are never
    called resolved. Real tiny.en weights, 2 requests x <= 6 tokens."""
    spec = ServeSpec(design="workload", num_requests=2, max_tokens=6, max_num_seqs=2, warmup_requests=0, repeats=2)
    res = trial.run(spec)
    assert list(res.variants) == ["0.11.0", HF] == res.params["variants"]
    tokens = {v: [r["num_output_tokens"] for r in res.runs(v)] for v in res.variants}
    assert tokens["0.11.0"] == tokens[HF] and min(tokens[HF]) > 0
    assert all(r["cpu_s"] > 0 for v in res.variants for r in res.runs(v))
    assert {c["metric"] for c in res.comparisons} == {"requests_per_s", "cpu_s"}
    assert all(c["low"] <= c["ratio"] <= c["high"] and c["pairs"] == 2 and not c["resolved"] for c in res.comparisons)
    back = Result.load(res.write(tmp_path / "w.json"))
    assert back.params["engine"] == "both" and back.params["arrival"] == "all"
