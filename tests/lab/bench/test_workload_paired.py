"""The in-process serving designs (workload, paired): schedule, A B B A rounds, gains and their
bookkeeping when a run is interrupted or fails (engines faked), and one real paired workload."""
import gc
import shlex
from types import SimpleNamespace

import numpy as np
import pytest

from refimpl.errors import InsufficientMemoryError
from refimpl.lab.bench import guard, serve, trial
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.serve import abba_sums, gains, latency_summary, make_workload
from refimpl.lab.bench.specs import HF, ServeSpec
from refimpl.lab.cli import main
from refimpl.lab.env import REPO_ROOT as ROOT
from refimpl.lab.stats import MIN_PAIRS
from refimpl.lab.studies.throughput import paired_table

GiB = 1 << 30


def test_workload_is_seeded_mixed_length_and_poisson():
    a, b = make_workload(40, seed=3, rate=4.0), make_workload(40, seed=3, rate=4.0)
    assert [w.arrival_s for w in a] == [w.arrival_s for w in b]
    assert all(np.array_equal(x.audio, y.audio) for x, y in zip(a, b))
    t = np.array([w.arrival_s for w in a])
    assert np.all(np.diff(t) > 0) and 2 < 40 / t[-1] < 8  # mean rate near 4 requests/s
    assert len({len(w.audio) for w in a}) > 30  # mixed lengths
    assert all(w.arrival_s == 0 for w in make_workload(5))
    s = latency_summary("e2e_s", [1.0, 2.0, 3.0, 4.0])
    assert s["e2e_s_p50"] == 2.5 and s["e2e_s_mean"] == 2.5


class FakeEngine:  # finishes every request in its first step, same tokens for all
    scheduler = SimpleNamespace(running=[])

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


PAIRED = ServeSpec(design="paired", model="whisper-tiny", variants=("0.10.2", "0.10.2+#24866"), repeats=10,
                   num_requests=2, max_tokens=4)


@pytest.fixture
def fake_engines(monkeypatch, request):
    """``fake_engines(**{label: interrupt_at})``: FakeEngines for the paired design; returns the
    log. The heap is frozen meanwhile: each block's gc.collect() then skips it (~0.7 s a block)."""
    monkeypatch.setattr(guard, "check_memory", lambda *a, **k: None)
    gc.freeze()
    request.addfinalizer(gc.unfreeze)

    def setup(error=KeyboardInterrupt, **interrupt_at):
        log = []
        monkeypatch.setattr(serve, "build_engine", lambda spec, label, **kw: FakeEngine(
            label, log, interrupt_at.get(label), error))
        return log
    return setup


def test_interrupt_keeps_the_whole_rounds_before_it(fake_engines, tmp_path, capsys):
    log = fake_engines(**{"0.10.2+#24866": 8})  # warm-up R C, rounds R C | C R | R, then C interrupted
    assert main(["bench", "serve", *shlex.split(PAIRED.command())[3:], "--output-json", str(tmp_path / "p.json")]) == 130
    res = Result.load(tmp_path / "p.json")
    assert log == ["0.10.2", "0.10.2+#24866"] * 2 + ["0.10.2+#24866", "0.10.2"] * 1 + ["0.10.2", "0.10.2+#24866"]
    assert res.params["interrupted"] and res.params["rounds_run"] == 2 and len(res.runs("0.10.2+#24866")) == 2
    assert res.params["tokens_identical"] and res.comparisons and gc.isenabled()
    assert "keeping the runs finished so far" in capsys.readouterr().err
    fake_engines(**{"0.10.2": 1})  # in the warm-up: nothing timed, and the Result says so
    res = trial.run(PAIRED)
    assert res.params["interrupted"] and res.params["rounds_run"] == 0 and res.comparisons == [] and res.missing
    assert all(r["runs"] == [] and r["summary"] == {} for r in res.variants.values())
    assert type(res).load(res.write(tmp_path / "p.json")).params["interrupted"]  # schema-valid


def test_a_failed_block_keeps_the_whole_rounds_before_it_and_exits_1(fake_engines, tmp_path, capsys, monkeypatch):
    fake_engines(error=RuntimeError("boom"), **{"0.10.2+#24866": 8})
    out = tmp_path / "p.json"
    assert main(["bench", "serve", *shlex.split(PAIRED.command())[3:], "--output-json", str(out)]) == 1
    res = Result.load(out)
    assert res.params["failed"] == "0.10.2+#24866 repeat 3/10: RuntimeError: boom" and res.params["rounds_run"] == 2
    assert capsys.readouterr().err.strip().endswith(
        f"error: 0.10.2+#24866 repeat 3/10: RuntimeError: boom (kept the 2 finished rounds in {out})")

    def no_engine(spec, label, **kw):
        raise RuntimeError("no engine")
    monkeypatch.setattr(serve, "build_engine", no_engine)
    res = trial.run(PAIRED)
    assert res.params["failed"] == "set-up: RuntimeError: no engine" and res.missing == ["runs"]


def test_rounds_alternate_and_a_fixed_time_stops_them(fake_engines):
    log = fake_engines()
    res = trial.run(PAIRED.replace(variants=("0.10.2", "0.10.2+#24866", "0.11.0"), repeats=3, warmup=False))
    assert log == ["0.10.2", "0.10.2+#24866", "0.11.0", "0.11.0", "0.10.2+#24866", "0.10.2",
                   "0.10.2", "0.10.2+#24866", "0.11.0"] and res.params["tokens_identical"]
    log.clear()
    res = trial.run(PAIRED.replace(repeats=None, budget_s=1e-9, warmup=False))
    assert log == ["0.10.2", "0.10.2+#24866"] and res.params["rounds_run"] == 1 and res.params["budget_s"] == 1e-9


def test_paired_gains():
    by = {"A": {"cpu_s": [1.1, 1.2, 1.0, 1.1, 1.1, 1.2], "wall_s": [1.1] * 6, "registry_s": [0.1] * 6},
          "B": {"cpu_s": [1.0, 1.2 / 1.1, 1.0 / 1.1, 1.0, 1.0, 1.2 / 1.1], "wall_s": [1.0] * 6,
                "registry_s": [0.0] * 6}}
    (row,) = gains(by, "cpu_s")
    assert row["variant"] == "B" and row["over"] == "A"
    assert row["gain"] == pytest.approx(0.1) and row["resolved"] and row["cost_model_gain"] == pytest.approx(0.1)
    few = {v: {k: x[:4] for k, x in d.items()} for v, d in by.items()}
    assert not gains(few, "cpu_s")[0]["resolved"]  # < MIN_PAIRS pairs: never resolved
    (quad,) = gains(by, "cpu_s", pairing="abba")  # one pair per two rounds, each side summed
    assert quad["pairs"] == 3 and quad["rounds"] == 6 and quad["gain"] == pytest.approx(0.1)
    assert abba_sums([1, 2, 3, 4, 5]) == [3, 7]
    with pytest.raises(ValueError):
        gains(by, "cpu_s", pairing="quad")
    by = {v: {"cpu_s": [t] * 3, "wall_s": [t] * 3, "registry_s": [0.0] * 3} for v, t in (("A", 2.0), ("B", 1.0), ("C", 0.5))}
    assert [round(r["gain"], 6) for r in gains(by, "cpu_s", "first")] == [1.0, 3.0]
    assert [round(r["gain"], 6) for r in gains(by, "cpu_s")] == [1.0, 1.0]


def test_the_gain_table_says_resolved_or_why_not():
    res = Result.load(ROOT / "results/cpu-amd-epyc-2c/paired_whisper-tiny.en_registry_runner-config.json")
    row = {"metric": "cpu_s", "pairing": "round", "variant": "0.10.2+#24866", "over": "0.10.2", "gain": 0.0342,
           "low": 0.0342, "high": 0.0342, "half_width": 0.0, "pairs": 1, "rounds": 1, "resolved": False,
           "cost_model_gain": 0.0}

    def resolved_cell():
        res.comparisons = [row]
        return paired_table([res]).splitlines()[-1].split(" | ")[5]
    assert resolved_cell() == f"no (< {MIN_PAIRS} pairs)"
    row.update(pairs=MIN_PAIRS, rounds=MIN_PAIRS, low=-0.01)
    assert resolved_cell() == "no (holds 0)"
    row.update(low=0.01, resolved=True)
    assert resolved_cell() == "yes"


@pytest.fixture
def fake_servers(monkeypatch):
    """The workload's servers replaced: each label serves a fixed result; the ``fail_at``-th
    call (warm-up included, counted from 1) raises ``error``. Returns the log of labels served."""
    monkeypatch.setattr(guard, "check_memory", lambda *a, **k: None)

    def setup(fail_at, error=KeyboardInterrupt):
        log = []

        def server(label):
            def one(step):
                log.append(label)
                if len(log) == fail_at:
                    raise error("boom") if error is not KeyboardInterrupt else error
                return {"num_requests": 2, "num_output_tokens": 4, "wall_s": 1.0, "steps": 2,
                        "requests_per_s": 2.0 + len(log), "output_tokens_per_s": 4.0,
                        **latency_summary("ttft_s", [0.1]), **latency_summary("e2e_s", [0.5])}
            return one
        monkeypatch.setattr(serve.Servers, "_engine", lambda self, label: server(label))
        monkeypatch.setattr(serve.Servers, "_hf", lambda self: server(HF))
        return log
    return setup


WORKLOAD = ["bench", "serve", "--design", "workload", "--model", "whisper-tiny", "--num-requests", "2",
            "--max-tokens", "4", "--repeats", "5"]


def test_an_interrupted_workload_keeps_whole_pairs_and_exits_130(fake_servers, tmp_path, capsys):
    log = fake_servers(fail_at=2 + 6)  # warm-up E H, then E H H E E | H interrupted
    out = tmp_path / "w.json"
    assert main([*WORKLOAD, "--output-json", str(out)]) == 130 and len(log) == 8
    res = Result.load(out)
    assert res.params["interrupted"] is True and res.params["failed"] is None and res.params["engine"] == "both"
    assert [len(res.runs(v)) for v in ("0.11.0", HF)] == [2, 2]  # the 3rd E dropped
    assert {c["pairs"] for c in res.comparisons} == {2} and not res.missing
    assert "keeping the runs finished so far" in capsys.readouterr().err
    fake_servers(fail_at=2 + 3)  # one pair: comparisons computed, not resolved
    assert main([*WORKLOAD, "--output-json", str(out)]) == 130
    assert [c["pairs"] for c in Result.load(out).comparisons] == [1, 1]
    fake_servers(fail_at=1)  # in the warm-up: no run, the Result says so
    assert main([*WORKLOAD, "--output-json", str(out)]) == 130
    res = Result.load(out)
    assert res.missing == ["runs"] and res.comparisons == [] and res.variants[HF]["summary"] == {}


def test_a_failed_workload_run_keeps_the_runs_before_it_and_exits_1(fake_servers, tmp_path, capsys):
    fake_servers(fail_at=1 + 2, error=RuntimeError)  # warm-up, repeat 1, repeat 2 fails
    out = tmp_path / "w.json"
    assert main([*WORKLOAD[:-1], "3", "--variants", "0.11.0", "--output-json", str(out)]) == 1
    res = Result.load(out)
    assert res.params["failed"] == "0.11.0 repeat 2/3: RuntimeError: boom"
    assert not res.params["interrupted"] and len(res.runs("0.11.0")) == 1
    assert capsys.readouterr().err.strip().endswith(
        f"error: 0.11.0 repeat 2/3: RuntimeError: boom (kept the 1 finished runs in {out})")


def test_workload_and_paired_refuse_requests_the_memory_cannot_hold(monkeypatch, tmp_path, capsys):
    from refimpl.config import ModelConfig
    from refimpl.lab.bench.memory import request_bytes
    from refimpl.worker.model_loader import parameter_bytes
    monkeypatch.setattr(guard, "check_serving_memory", lambda config, available=None: GiB)  # an engine
    spec = ServeSpec(design="workload", model="whisper-tiny", num_requests=8, warmup_requests=2)
    need = GiB + request_bytes("whisper-tiny", 8, True) + request_bytes("whisper-tiny", 2, False)
    guard.check_memory(spec.resolve(), available=need)
    with pytest.raises(InsufficientMemoryError) as e:
        guard.check_memory(spec.resolve(), available=need - 1)
    assert e.value.field == "num_requests" and e.value.limit == need - 1
    spec = ServeSpec(design="paired", model="whisper-tiny", variants=("0.10.2", "0.10.2+#24866"), num_requests=8)
    weights = parameter_bytes(ModelConfig("whisper-tiny", device="cpu"))  # held once: the engines share them
    need = 2 * GiB - weights + request_bytes("whisper-tiny", 8, True)  # one engine per variant
    guard.check_memory(spec.resolve(), available=need)
    with pytest.raises(InsufficientMemoryError):
        guard.check_memory(spec.resolve(), available=need - 1)
    monkeypatch.setattr(trial, "executor", lambda *a: pytest.fail("ran despite too little memory"))
    for design in ("workload", "paired"):
        assert main(["bench", "serve", "--design", design, "--model", "whisper-tiny", "--num-requests", "100000000",
                     "--output-json", str(tmp_path / "w.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert all(line.startswith("refimpl bench serve: error: num_requests: 100000000 requests hold up to") for line in err)
    assert not (tmp_path / "w.json").exists()
