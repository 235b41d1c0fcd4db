"""Per-step telemetry in the serving JSON, variant engines on one copy of the weights, the engine
thread's affinity (issue 42). Real engines (whisper-tiny, small scale, random weights, CPU)."""
import os
from contextlib import nullcontext

import pytest
import torch

from refimpl.engine.llm_engine import LLMEngine
from refimpl.lab.bench import serve, trial
from refimpl.lab.bench.device_state import alloc_retries, gpu_state, pin_engine_thread, restore_affinity
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.serve_loop import make_workload, serve_engine
from refimpl.lab.bench.specs import ServeSpec
from refimpl.lab.bench.telemetry import COLUMNS, STEP_KINDS, StepRecorder
from refimpl.multimodal import MULTIMODAL_REGISTRY as REG
from refimpl.sampling_params import SamplingParams
from refimpl.testing import DispatchCounter
from refimpl.worker.model_loader import get_model, shared_weights

PARAMS = SamplingParams(max_tokens=4, ignore_eos=True)


def engine(variant: str = "0.11.0") -> LLMEngine:
    return LLMEngine.from_args("whisper-tiny", device="cpu", encoder_len_variant=variant, max_num_seqs=2,
                               num_gpu_blocks=400, process_mode="inproc", disable_mm_preprocessor_cache=True)


class FakeEvents:
    """ForwardEvents' interface on the CPU: pair i lasts (i + 1) ms."""

    def __init__(self):
        self.num_recorded, self.open = 0, False

    def start(self):
        assert not self.open
        self.open = True

    def stop(self):
        assert self.open
        self.open, self.num_recorded = False, self.num_recorded + 1

    def seconds(self):
        return [(i + 1) / 1e3 for i in range(self.num_recorded)]


def test_each_step_is_recorded_by_kind_running_requests_and_registry_seconds():
    with shared_weights():
        old, new = engine("0.10.2"), engine("0.11.0")   # 0.10.2 asks the registry every step; 0.11.0 never
    work = make_workload(3, 0)
    a = serve_engine(old, work, PARAMS, concurrency=2)
    b = serve_engine(new, work, PARAMS, concurrency=2)
    for out in (a, b):
        cols = out["step_records"]
        assert set(cols) == set(COLUMNS) and all(len(cols[k]) == out["steps"] for k in COLUMNS if k != "forward_s")
        assert cols["forward_s"] is None                                   # the CPU: no CUDA events
        assert set(cols["kind"]) <= {*STEP_KINDS, None} and {"prefill", "decode"} <= set(cols["kind"])
        assert max(cols["num_running_reqs"]) == 2                          # C = 2
        s = out["step_summary"]
        assert sum(v["steps"] for v in s.values()) == sum(k is not None for k in cols["kind"])
        assert all(v["forward_s_median"] is None for v in s.values())
    assert a["tokens"] == b["tokens"]
    assert all(x > 0 for k, x in zip(a["step_records"]["kind"], a["step_records"]["registry_s"]) if k)
    assert sum(b["step_records"]["registry_s"]) == 0 and b["registry_calls"] == 0
    # every registry call of a block falls inside a step (rounded to 1 us a step)
    assert sum(a["step_records"]["registry_s"]) == pytest.approx(a["registry_s"], abs=1e-6 * a["steps"])


def test_telemetry_adds_no_op_and_no_sync_to_a_step():
    with shared_weights():
        plain, watched = engine(), engine()
    per_step = []
    for eng, rec in ((plain, None), (watched, StepRecorder(watched, REG.stats))):
        for w in make_workload(3, 0):
            eng.add_request(None, {"multi_modal_data": {"audio": (w.audio, 16000)}}, PARAMS)
        counts, counter = [], DispatchCounter()
        with rec or nullcontext():
            while eng.has_unfinished_requests():
                counter.reset()
                with counter:
                    (rec or eng).step()
                counts.append((counter.num_ops, counter.num_syncs))
        per_step.append(counts)
    assert per_step[0] == per_step[1] and all(s == 0 for _, s in per_step[1])
    assert len(per_step[1]) == len(rec.columns["wall_s"])


def test_forward_events_pair_with_the_steps_that_ran_the_model():
    eng = engine()
    runner, events = eng.model_runner.whisper_runner, FakeEvents()
    out = serve_engine(eng, make_workload(2, 0), PARAMS, events=events)
    assert runner.forward_events is None                                  # detached after the block
    fwd, kinds = out["step_records"]["forward_s"], out["step_records"]["kind"]
    assert events.num_recorded == sum(k is not None for k in kinds) and not events.open
    assert [x for x in fwd if x is not None] == pytest.approx([(i + 1) / 1e3 for i in range(events.num_recorded)])
    assert all((x is None) == (k is None) for x, k in zip(fwd, kinds))
    assert out["step_summary"]["decode"]["forward_s_total"] > 0


def test_variant_engines_share_one_read_only_copy_of_the_weights():
    with shared_weights() as models:
        a, b = engine("0.10.2"), engine("0.11.0")
    m = a.model_runner.model
    assert m is b.model_runner.model and list(models.values()) == [m]
    assert not any(p.requires_grad for p in m.parameters())
    before = [p.detach().clone() for p in m.parameters()]
    serve_engine(a, make_workload(2, 0), PARAMS)
    assert all(torch.equal(x, p) for x, p in zip(before, m.parameters()))
    assert get_model(a.vllm_config.model_config) is not m                  # outside the scope: a new model


def test_pinning_takes_one_allowed_cpu_and_gives_them_back():
    rec = pin_engine_thread()
    try:
        if not hasattr(os, "sched_setaffinity"):
            assert rec["pinned"] is False and rec["reason"]
            return
        assert rec["pinned"] and len(rec["cpus"]) == 1 and set(rec["cpus"]) <= set(rec["allowed"])
        assert os.sched_getaffinity(0) == set(rec["cpus"])
    finally:
        restore_affinity(rec)
    assert os.sched_getaffinity(0) == set(rec["allowed"])
    assert gpu_state("cpu") is None and alloc_retries("cpu") is None


@pytest.mark.slow  # two trials, ~50 s each on the shared 2-core VM
@pytest.mark.parametrize("design", ["paired", "fresh"])
def test_the_serving_json_carries_the_telemetry(design, tmp_path):
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    kw = (dict(variants=("0.10.2", "0.11.0"), max_concurrency=2, output_len=3, max_num_seqs=2, num_requests=2)
          if design == "paired" else dict(variants=("0.11.0",), max_tokens=3, num_requests=2, warmup_requests=0))
    spec = ServeSpec(design=design, model="whisper-tiny", repeats=2, device="cpu", **kw)
    res = Result.load(trial.run(spec, in_process=design == "fresh", check=True).write(tmp_path / "r.json"))
    assert (os.sched_getaffinity(0) if before is not None else None) == before   # given back
    env = res.env
    assert env["gpu_telemetry"].startswith("none") and "pinned" in env["engine_affinity"]
    for v in res.variants:
        for r in res.runs(v):
            assert "engine_affinity" not in r and r["gpu"] is None and r["alloc_retries"] is None
            cols = r["step_records"]
            assert len(cols["wall_s"]) == len(cols["kind"]) > 0 and cols["forward_s"] is None
            assert design == "fresh" or len(cols["kind"]) == r["steps"]   # fresh: steps are the core's
            assert max(cols["num_running_reqs"]) == 2 and r["step_summary"]["decode"]["steps"] >= 1
            assert r["num_output_tokens"] == 2 * 3
    if design == "paired":
        assert res.params["max_concurrency"] == 2 and res.params["output_len"] == 3
        assert res.params["tokens_identical"] is True


def test_serve_keeps_its_public_names():
    assert serve.make_workload is make_workload and serve.serve_engine is serve_engine
