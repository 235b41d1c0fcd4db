"""Workload schedule and paired-design bookkeeping (no model: engines are faked)."""
import numpy as np
import pytest

from refimpl.bench.paired import abba_sums, block_order, gains, run_paired
from refimpl.bench.workload import latency_summary, make_workload


def test_workload_is_seeded_mixed_length_and_poisson():
    a = make_workload(40, seed=3, arrival="poisson", rate=4.0)
    b = make_workload(40, seed=3, arrival="poisson", rate=4.0)
    assert [w.arrival_s for w in a] == [w.arrival_s for w in b]
    assert all(np.array_equal(x.audio, y.audio) for x, y in zip(a, b))
    t = np.array([w.arrival_s for w in a])
    assert np.all(np.diff(t) > 0) and 2 < 40 / t[-1] < 8  # mean rate near 4 requests/s
    assert len({len(w.audio) for w in a}) > 30  # mixed lengths
    assert all(w.arrival_s == 0 for w in make_workload(5, arrival="all"))
    with pytest.raises(ValueError):
        make_workload(3, arrival="poisson", rate=0)
    s = latency_summary("e2e_s", [1.0, 2.0, 3.0, 4.0])
    assert s["e2e_s_p50"] == 2.5 and s["e2e_s_mean"] == 2.5


class FakeEngine:  # finishes every request in its first step, same tokens for all
    def __init__(self, name, log, interrupt_at=None, error=KeyboardInterrupt):
        self.name, self.log, self.pending, self.interrupt_at, self.error = name, log, [], interrupt_at, error

    def add_request(self, rid, prompt, params):
        if not self.pending:
            self.log.append(self.name)
        self.pending.append(str(len(self.pending)))
        return self.pending[-1]

    def has_unfinished_requests(self):
        return bool(self.pending)

    def step(self):
        from refimpl.outputs import RequestOutput
        if len(self.log) == self.interrupt_at:  # SIGINT (or ``error``) in this engine's block
            raise self.error
        out, self.pending = [RequestOutput(r, [1], [7, 8]) for r in self.pending], []
        return out


def test_interrupt_keeps_the_whole_rounds_before_it(monkeypatch, capsys, tmp_path):
    log = []
    engines = {"A": FakeEngine("A", log), "B": FakeEngine("B", log, interrupt_at=6)}
    res = run_paired(engines, [np.zeros(10)] * 2, None, rounds=10)
    assert log == ["A", "B", "B", "A", "A", "B"] and res["interrupted"]  # round 3 broken off in B
    assert [len(res["by_variant"][v]["cpu_s"]) for v in "AB"] == [2, 2]
    assert "keeping the rounds finished so far" in capsys.readouterr().err
    # during the warm-up: nothing timed, and the Result says so instead of failing
    from refimpl.bench import paired
    log.clear()
    monkeypatch.setattr(paired, "build_engines", lambda model, variants, **kw: {
        "0.10.2": FakeEngine("0.10.2", log, interrupt_at=1), "0.10.2+#24866": FakeEngine("0.10.2+#24866", log)})
    out = paired.run(paired.PairedSpec(variants=("0.10.2", "0.10.2+#24866"), block_requests=2))
    assert out.params["interrupted"] and out.params["rounds_run"] == 0 and out.comparisons == []
    assert all(r["runs"] == [] and r["summary"] == {} for r in out.variants.values())
    assert type(out).load(out.write(tmp_path / "paired.json")).params["interrupted"]  # schema-valid


def test_alternating_order_and_paired_gains():
    assert [block_order(["A", "B", "C"], r) for r in range(3)] == [
        ["A", "B", "C"], ["C", "B", "A"], ["A", "B", "C"]]

    log = []
    res = run_paired({"A": FakeEngine("A", log), "B": FakeEngine("B", log)}, [np.zeros(10)] * 2,
                     None, rounds=4)
    assert log == ["A", "B", "B", "A", "A", "B", "B", "A"] and res["tokens_identical"]
    # fixed-time design: a zero budget still runs one round, then stops; gc is back on after
    import gc
    log.clear()
    res = run_paired({"A": FakeEngine("A", log), "B": FakeEngine("B", log)}, [np.zeros(10)] * 2,
                     None, rounds=1000, budget_s=0.0)
    assert log == ["A", "B"] and len(res["by_variant"]["A"]["cpu_s"]) == 1 and gc.isenabled()
    by = {"A": {"cpu_s": [1.1, 1.2, 1.0, 1.1, 1.1, 1.2], "wall_s": [1.1] * 6, "registry_s": [0.1] * 6},
          "B": {"cpu_s": [1.0, 1.2 / 1.1, 1.0 / 1.1, 1.0, 1.0, 1.2 / 1.1], "wall_s": [1.0] * 6,
                "registry_s": [0.0] * 6}}
    (row,) = gains(by, "cpu_s")
    assert row["variant"] == "B" and row["over"] == "A"
    assert row["gain"] == pytest.approx(0.1) and row["resolved"]
    few = {v: {k: x[:4] for k, x in d.items()} for v, d in by.items()}
    assert not gains(few, "cpu_s")[0]["resolved"]  # < MIN_PAIRS pairs: never resolved
    assert row["cost_model_gain"] == pytest.approx(0.1)
    # A B B A pairing: one pair per two rounds, each side summed (a drift within them cancels)
    (quad,) = gains(by, "cpu_s", pairing="abba")
    assert quad["pairs"] == 3 and quad["rounds"] == 6 and quad["pairing"] == "abba"
    assert quad["gain"] == pytest.approx(0.1)  # 2.3 / (1 + 1.2/1.1) = 2.1 / (1/1.1 + 1) = 1.1
    assert abba_sums([1, 2, 3, 4, 5]) == [3, 7]
    with pytest.raises(ValueError):
        gains(by, "cpu_s", pairing="quad")


def test_variant_labels_and_gains_against_the_first():
    from refimpl.bench.paired import parse_variant
    assert parse_variant("audios-per-step@8", 4) == ("audios-per-step", 8)
    assert parse_variant("audios-per-step", 4) == ("audios-per-step", 4)
    assert parse_variant("0.11.0", 4) == ("0.11.0", 1)
    with pytest.raises(ValueError):
        parse_variant("0.10.2+#24866@2", 1)
    by = {v: {"cpu_s": [t] * 3, "wall_s": [t] * 3, "registry_s": [0.0] * 3}
          for v, t in (("A", 2.0), ("B", 1.0), ("C", 0.5))}
    assert [round(r["gain"], 6) for r in gains(by, "cpu_s", "first")] == [1.0, 3.0]
    assert [round(r["gain"], 6) for r in gains(by, "cpu_s")] == [1.0, 1.0]


def test_model_curve_points_and_figure(tmp_path):
    from refimpl.analysis.model_curve import plot_gain_vs_step_time, points
    from refimpl.bench.schema import Result
    by = {"0.10.2": {"wall_s": [2.2, 2.3], "cpu_s": [2.1, 2.2], "registry_s": [0.2, 0.2],
                       "registry_calls": [20, 20], "steps": [20, 20]},
          "0.10.2+#24866": {"wall_s": [2.0, 2.1], "cpu_s": [1.9, 2.0], "registry_s": [0.0, 0.0],
                            "registry_calls": [0, 0], "steps": [20, 20]}}
    runs = {v: {"runs": [{k: x[k][i] for k in x} for i in range(2)], "summary": {}} for v, x in by.items()}
    res = Result("paired", {}, {"variants": list(by)}, runs, missing=["env"],
                 comparisons=gains(by, "wall_s"))
    res.write(tmp_path / "p.json")
    (p,) = points(tmp_path / "p.json")
    assert p["registry_s_per_call"] == pytest.approx(0.01) and p["step_s"] == pytest.approx(2.05 / 20)
    plot_gain_vs_step_time([p], out_png=tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 1000


def test_engine_and_generate_paired_in_one_process(tmp_path):
    """--engine both: E H H E order, the same requests and the same greedy tokens on both
    sides (EOS stops), CPU seconds per run, and both comparisons with their intervals;
    two pairs are never called resolved. Real tiny.en weights, 2 requests x <= 6 tokens."""
    from refimpl.bench.schema import Result
    from refimpl.bench.workload import WorkloadSpec, run, run_order
    assert run_order(["E", "H"], 3) == ["E", "H", "H", "E", "E", "H"]
    assert run_order(["E"], 2) == ["E", "E"]
    lines: list[str] = []
    res = run(WorkloadSpec(engine="both", num_requests=2, max_tokens=6, max_num_seqs=2,
                           warmup_requests=0, repeats=2), progress=lines.append)
    assert [line.split(":")[0] for line in lines] == ["0.11.0", "hf-generate", "hf-generate",
                                                      "0.11.0"]
    assert list(res.variants) == ["0.11.0", "hf-generate"] == res.params["variants"]
    tokens = {v: [r["num_output_tokens"] for r in res.runs(v)] for v in res.variants}
    assert tokens["0.11.0"] == tokens["hf-generate"] and min(tokens["hf-generate"]) > 0
    assert all(r["cpu_s"] > 0 for v in res.variants for r in res.runs(v))
    assert {c["metric"] for c in res.comparisons} == {"requests_per_s", "cpu_s"}
    assert all(c["low"] <= c["ratio"] <= c["high"] and c["pairs"] == 2 and not c["resolved"]
               for c in res.comparisons)
    back = Result.load(res.write(tmp_path / "w.json"))
    assert WorkloadSpec.from_params(back.params) == WorkloadSpec(
        engine="both", num_requests=2, max_tokens=6, max_num_seqs=2, warmup_requests=0, repeats=2)


def test_gain_line_says_resolved_or_why_not():
    from refimpl.bench.paired import MIN_PAIRS, gain_line
    row = {"metric": "cpu_s", "pairing": "round", "variant": "B", "over": "A", "gain": 0.0342,
           "low": 0.0342, "high": 0.0342, "pairs": 1, "rounds": 1, "resolved": False,
           "cost_model_gain": 0.0}
    assert "(95% CI, 1 pair of 1 round, not resolved: < 5 pairs)" in gain_line(row)
    row.update(pairs=MIN_PAIRS, rounds=MIN_PAIRS, low=-0.01)
    assert f"{MIN_PAIRS} pairs of {MIN_PAIRS} rounds, not resolved: holds 0)" in gain_line(row)
    row.update(low=0.01, resolved=True)
    assert gain_line(row).count("resolved") == 1 and ", resolved)" in gain_line(row)


def fake_servers(monkeypatch, fail_at, error=KeyboardInterrupt):
    """workload._servers replaced: each label serves a fixed result; the ``fail_at``-th call
    (warm-up included, counted from 1) raises ``error``. Returns the log of labels served."""
    from refimpl.bench import workload
    log = []

    def server(label):
        def serve(work):
            log.append(label)
            if len(log) == fail_at:
                raise error("boom") if error is not KeyboardInterrupt else error
            return {"num_requests": len(work), "num_output_tokens": 4, "wall_s": 1.0, "steps": 2,
                    "requests_per_s": 2.0 + len(log), "output_tokens_per_s": 4.0,
                    **latency_summary("ttft_s", [0.1]), **latency_summary("e2e_s", [0.5])}
        return serve
    monkeypatch.setattr(workload, "_servers", lambda spec: {k: server(k) for k in spec.labels})
    return log


def test_an_interrupted_workload_keeps_whole_pairs_and_exits_130(monkeypatch, tmp_path, capsys):
    from refimpl.bench.schema import Result
    from refimpl.cli import main
    log = fake_servers(monkeypatch, fail_at=2 + 6)  # warm-up E H, then E H H E E | H interrupted
    argv = ["bench", "workload", "--model", "whisper-tiny", "--engine", "both", "--num-requests", "2",
            "--max-tokens", "4", "--repeats", "5", "--output-json", str(tmp_path / "w.json")]
    assert main(argv) == 130 and len(log) == 8
    res = Result.load(tmp_path / "w.json")
    assert res.params["interrupted"] is True and res.params["failed"] is None
    assert [len(res.runs(v)) for v in ("0.11.0", "hf-generate")] == [2, 2]  # the 3rd E dropped
    assert {c["pairs"] for c in res.comparisons} == {2} and not res.missing
    assert "keeping the runs finished so far" in capsys.readouterr().err
    fake_servers(monkeypatch, fail_at=2 + 3)  # one pair: comparisons computed, not resolved
    assert main(argv) == 130
    assert [c["pairs"] for c in Result.load(tmp_path / "w.json").comparisons] == [1, 1]
    fake_servers(monkeypatch, fail_at=1)  # in the warm-up: no run, the Result says so
    assert main(argv) == 130
    res = Result.load(tmp_path / "w.json")
    assert res.missing == ["runs"] and res.comparisons == [] and res.variants["hf-generate"]["summary"] == {}


def test_a_failed_workload_run_keeps_the_runs_before_it_and_exits_1(monkeypatch, tmp_path, capsys):
    from refimpl.bench.schema import Result
    from refimpl.cli import main
    fake_servers(monkeypatch, fail_at=1 + 2, error=RuntimeError)  # warm-up, repeat 1, repeat 2 fails
    assert main(["bench", "workload", "--model", "whisper-tiny", "--num-requests", "2", "--max-tokens", "4",
                 "--repeats", "3", "--output-json", str(tmp_path / "w.json")]) == 1
    res = Result.load(tmp_path / "w.json")
    assert res.params["failed"] == "0.11.0 repeat 2/3: RuntimeError: boom"
    assert not res.params["interrupted"] and len(res.runs("0.11.0")) == 1
    assert capsys.readouterr().err.strip().endswith(
        "error: 0.11.0 repeat 2/3: RuntimeError: boom (kept the 1 finished runs in "
        f"{tmp_path / 'w.json'})")


def test_workload_and_paired_refuse_requests_the_memory_cannot_hold(monkeypatch, tmp_path, capsys):
    import refimpl.memory
    from refimpl.bench import paired, workload
    from refimpl.bench.memory import request_bytes
    from refimpl.cli import main
    from refimpl.errors import InsufficientMemoryError
    from refimpl.memory import GiB
    monkeypatch.setattr(refimpl.memory, "check_serving_memory", lambda config, available: GiB)  # an engine
    spec = workload.WorkloadSpec(model="whisper-tiny", num_requests=8, warmup_requests=2)
    need = GiB + request_bytes("whisper-tiny", 8, True) + request_bytes("whisper-tiny", 2, False)
    workload.preflight(spec, available=need)
    with pytest.raises(InsufficientMemoryError) as e:
        workload.preflight(spec, available=need - 1)
    assert e.value.field == "num_requests" and e.value.limit == need - 1
    spec = paired.PairedSpec(model="whisper-tiny", variants=("0.10.2", "0.10.2+#24866"), block_requests=8)
    need = 2 * GiB + request_bytes("whisper-tiny", 8, True)  # one engine per variant
    paired.preflight(spec, available=need)
    with pytest.raises(InsufficientMemoryError) as e:
        paired.preflight(spec, available=need - 1)
    assert e.value.field == "block_requests"
    monkeypatch.setattr(workload, "make_workload", lambda *a, **k: pytest.fail("ran despite too little memory"))
    monkeypatch.setattr(paired, "build_engines", lambda *a, **k: pytest.fail("ran despite too little memory"))
    assert main(["bench", "workload", "--model", "whisper-tiny", "--num-requests", "100000000",
                 "--output-json", str(tmp_path / "w.json")]) == 2
    assert main(["bench", "paired", "--model", "whisper-tiny", "--block-requests", "100000000",
                 "--output-json", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("refimpl bench workload: error: num_requests: 100000000 requests hold up to")
    assert err[1].startswith("refimpl bench paired: error: block_requests: 100000000 requests hold up to")
    assert not (tmp_path / "w.json").exists() and not (tmp_path / "p.json").exists()


def test_paired_main_keeps_whole_rounds_on_ctrl_c_and_while_building(monkeypatch, tmp_path, capsys):
    from refimpl.bench import paired
    from refimpl.bench.schema import Result
    log = []
    monkeypatch.setattr(paired, "build_engines", lambda model, variants, **kw: {
        "0.10.2": FakeEngine("0.10.2", log), "0.10.2+#24866": FakeEngine("0.10.2+#24866", log, interrupt_at=8)})
    argv = ["--model", "whisper-tiny", "--variant", "0.10.2,0.10.2+#24866", "--rounds", "10",
            "--block-requests", "2", "--max-tokens", "4", "--gc", "default", "--output-json", str(tmp_path / "p.json")]
    assert paired.main(argv) == 130  # warm-up R C, rounds R C | C R | R, then C interrupted
    res = Result.load(tmp_path / "p.json")
    assert res.params["interrupted"] and res.params["rounds_run"] == 2 and len(res.runs("0.10.2")) == 2

    def interrupted_build(model, variants, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(paired, "build_engines", interrupted_build)
    assert paired.main(argv) == 130
    res = Result.load(tmp_path / "p.json")
    assert res.params["interrupted"] and res.params["rounds_run"] == 0 and res.missing == ["runs"]
    assert "interrupted" in capsys.readouterr().err


def test_a_failed_paired_block_keeps_the_whole_rounds_before_it_and_exits_1(monkeypatch, tmp_path, capsys):
    from refimpl.bench import paired
    from refimpl.bench.schema import Result
    log = []
    monkeypatch.setattr(paired, "build_engines", lambda model, variants, **kw: {
        "0.10.2": FakeEngine("0.10.2", log),
        "0.10.2+#24866": FakeEngine("0.10.2+#24866", log, interrupt_at=8, error=RuntimeError("boom"))})
    argv = ["--model", "whisper-tiny", "--variant", "0.10.2,0.10.2+#24866", "--rounds", "10",
            "--block-requests", "2", "--max-tokens", "4", "--gc", "default", "--output-json", str(tmp_path / "p.json")]
    assert paired.main(argv) == 1  # warm-up R C, rounds R C | C R | R, then C fails
    res = Result.load(tmp_path / "p.json")
    assert res.params["failed"] == "round 3: RuntimeError: boom" and res.params["rounds_run"] == 2
    assert not res.params["interrupted"] and len(res.runs("0.10.2+#24866")) == 2 and res.comparisons
    assert capsys.readouterr().err.strip().endswith(
        f"error: round 3: RuntimeError: boom (kept the 2 finished rounds in {tmp_path / 'p.json'})")

    def failed_build(model, variants, **kw):
        raise RuntimeError("no engine")
    monkeypatch.setattr(paired, "build_engines", failed_build)
    assert paired.main(argv) == 1
    res = Result.load(tmp_path / "p.json")
    assert res.params["failed"] == "building the engines: RuntimeError: no engine" and res.missing == ["runs"]
