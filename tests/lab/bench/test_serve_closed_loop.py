"""The serving bench's closed loop (issue 42): concurrency C and output length L as ServeSpec fields,
refused at both ends of their ranges with one line naming the field and the limit; the loop keeps
exactly C requests in flight; the warm-up holds a full batch (engines faked, no model)."""
from types import SimpleNamespace

import pytest

from refimpl.errors import ConfigError
from refimpl.lab.bench import guard, serve
from refimpl.lab.bench.serve_checks import max_tokens_limit
from refimpl.lab.bench.serve_loop import make_workload, serve_engine
from refimpl.lab.bench.specs import ServeSpec
from refimpl.lab.cli import main
from refimpl.outputs import RequestOutput
from refimpl.sampling_params import SamplingParams

PAIRED = dict(design="paired", model="whisper-tiny", variants=("0.10.2", "0.11.0"), num_requests=4, max_num_seqs=3)


def check(**kw) -> None:
    guard.check(ServeSpec(**{**PAIRED, **kw}), memory=False)


def refused(**kw) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        check(**kw)
    return e.value


def test_concurrency_is_taken_at_both_ends_and_refused_beyond_them():
    check(max_concurrency=1)
    check(max_concurrency=3)                                 # min(max_num_seqs 3, num_requests 4)
    check(max_concurrency=4, max_num_seqs=8)                 # min(8, num_requests 4)
    assert refused(max_concurrency=0).field == "max_concurrency"
    e = refused(max_concurrency=4)
    assert e.field == "max_concurrency" and "<= 3" in str(e) and "\n" not in str(e)
    assert refused(max_concurrency=5, max_num_seqs=8).field == "max_concurrency"
    assert refused(max_concurrency=2.0).field == "max_concurrency"   # the type, before the value
    assert refused(design="fresh", variants=("0.11.0",), max_concurrency=2).field == "max_concurrency"
    assert refused(design="workload", variants=("0.11.0",), max_concurrency=2, rate=1.0).field == "rate"


@pytest.mark.parametrize("model", ["whisper-tiny", "whisper-tiny.en"])
def test_output_len_is_taken_at_both_ends_and_refused_beyond_them(model):
    limit = max_tokens_limit(model)
    assert limit == 448 - (2 if model.endswith(".en") else 4)  # max_target_positions - decoder prompt
    check(model=model, output_len=1)
    check(model=model, output_len=limit)
    assert refused(model=model, output_len=0).field == "output_len"
    e = refused(model=model, output_len=limit + 1)
    assert e.field == "output_len" and f"<= {limit}" in str(e)
    check(model=model, output_len=5, max_tokens=5)
    assert refused(model=model, output_len=5, max_tokens=6).field == "max_tokens"
    assert refused(design="fresh", model=model, variants=("0.11.0",), output_len=5).field == "output_len"


def test_output_len_sets_max_tokens_and_the_command_repeats_it():
    s = ServeSpec(**PAIRED, output_len=7, max_concurrency=2).resolve()
    assert s.max_tokens == 7 and s.params()["output_len"] == 7 and s.params()["max_concurrency"] == 2
    line = s.command()
    assert "--output-len 7" in line and "--max-concurrency 2" in line


def test_the_cli_refuses_in_one_line_naming_the_field(tmp_path, capsys):
    base = ["bench", "serve", "--design", "workload", "--model", "whisper-tiny", "--num-requests", "4",
            "--output-json", str(tmp_path / "w.json")]
    for flags, field in ((["--max-concurrency", "5"], "max_concurrency"), (["--output-len", "0"], "output_len")):
        assert main([*base, *flags]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"refimpl bench serve: error: {field}: ")
    assert not (tmp_path / "w.json").exists()


class LoopEngine:
    """Each request finishes after ``length`` steps; records how many were in flight at each step."""

    def __init__(self, length: int):
        self.length, self.left, self.in_flight, self.n = length, {}, [], 0
        self.scheduler = SimpleNamespace(running=[])

    def add_request(self, rid, prompt, params):
        self.n += 1
        self.left[str(self.n)] = self.length
        return str(self.n)

    def has_unfinished_requests(self):
        return bool(self.left)

    def step(self):
        self.in_flight.append(len(self.left))
        for r in self.left:
            self.left[r] -= 1
        done = [r for r, n in self.left.items() if n == 0]
        for r in done:
            del self.left[r]
        return [RequestOutput(r, [1], [7] * self.length) for r in done]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_the_closed_loop_keeps_c_requests_in_flight(concurrency):
    eng = LoopEngine(length=2)
    out = serve_engine(eng, make_workload(7, 0, rate=0.5), SamplingParams(max_tokens=2), concurrency=concurrency)
    assert out["num_requests"] == 7 and out["num_output_tokens"] == 14
    full = [n for n in eng.in_flight if n == concurrency]
    assert max(eng.in_flight) == concurrency and len(full) >= len(eng.in_flight) - 2  # the last ones drain
    assert out["steps"] == len(eng.in_flight) and out["wall_s"] < 5  # arrivals (up to ~14 s) ignored
    assert len(out["step_records"]["wall_s"]) == out["steps"] and out["step_records"]["forward_s"] is None


def test_the_warm_up_holds_a_full_batch_and_l_ignores_eos(monkeypatch):
    monkeypatch.setattr(serve, "build_engine", lambda spec, label, **kw: LoopEngine(2))
    spec = ServeSpec(design="workload", model="whisper-tiny", variants=("0.11.0",), num_requests=4,
                     max_num_seqs=4, warmup_requests=1, max_concurrency=3, output_len=5).resolve()
    s = serve.Servers(spec)
    try:
        assert len(s.warm) == 3 and s.params.ignore_eos and s.params.max_tokens == 5
        rec = s(SimpleNamespace(label="0.11.0", round=None))
        assert max(s.engines["0.11.0"].in_flight) == 3 and rec["num_requests"] == 3
        assert rec["gpu"] is None and rec["alloc_retries"] is None and "pinned" in rec["engine_affinity"]
    finally:
        s.close()
    plain = serve.Servers(ServeSpec(design="workload", model="whisper-tiny", variants=("0.11.0",),
                                    num_requests=4, warmup_requests=1).resolve())
    plain.close()
    assert len(plain.warm) == 1 and not plain.params.ignore_eos
