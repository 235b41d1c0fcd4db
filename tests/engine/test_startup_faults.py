"""Start-up faults and reset_mm_cache with requests in flight (issue #4, part 4).

Adds to tests/engine/test_engine_startup.py (Qwen: pass counts, a second start-up, a capture fault)
and tests/engine/test_llm_engine.py (reset refused while requests are in flight):

- a fault injected into EVERY start-up phase of a Whisper LLMEngine (processor creation,
  runner init, model load, profile run, KV init, graph capture, scheduler init) raises the
  injected error, leaves the process-wide processing cache empty, and leaves no half-built
  runner alive once the exception is dropped;
- a start-up after all those failures gives the same budgets, block count and HF passes
  per phase as a clean first one;
- a refused reset_mm_cache() (EngineStateError through LLMEngine) leaves the cache and the
  requests' inputs untouched, and the outputs equal a run without the attempted resets.
"""
from __future__ import annotations

import gc
import weakref

import pytest
import torch

from refimpl.audio import make_request_audios
from refimpl.engine.llm_engine import LLMEngine
from refimpl.errors import EngineStateError
from refimpl.multimodal import MULTIMODAL_REGISTRY as REG
from refimpl.multimodal.registry import MultiModalRegistry
from refimpl.sampling_params import SamplingParams
from refimpl.worker.gpu_model_runner import GPUModelRunner

pytestmark = pytest.mark.slow  # engine start-ups with faults


# vLLM 0.9.0's row: runner_init processes the Whisper lookup, so every later phase's fault hits
# a filled cache (refimpl's formula leaves the cache empty until the profile run)
ENGINE_KW = dict(startup_variant="0.9.0", device="cpu", max_num_seqs=4, num_gpu_blocks=300, process_mode="inproc")


class InjectedFault(RuntimeError):
    pass


def _fail(*a, **k):
    raise InjectedFault("injected")


def _after(orig):
    """Run the original (so the phase's work, e.g. cache fills, happens), then fail."""
    def f(*a, **k):
        orig(*a, **k)
        raise InjectedFault("injected after the phase ran")
    return f


def _fail_once_cache_filled(orig):
    """create_processor that fails once the first HF pass has filled the cache (in the
    profile run, which builds its processor after runner_init's pass)."""
    def f(self, *a, **k):
        if self.cache_bytes() > 0:
            raise InjectedFault("processor creation with a filled cache")
        return orig(self, *a, **k)
    return f


def _report(engine):
    r = engine.engine_core.report
    return dict(budget=(r.encoder_compute_budget, r.encoder_cache_size), blocks=r.num_gpu_blocks,
                passes=r.passes_by_phase, max_tokens=r.max_tokens_per_item,
                cache_after=r.cache_bytes_after_reset)


@pytest.fixture(scope="module")
def clean_first():
    e = LLMEngine.from_args("whisper-tiny", **ENGINE_KW)
    rep = _report(e)
    assert e.engine_core.report.cache_bytes_before_reset > 0  # the faults below hit a filled cache
    return rep


PHASES = {
    # phase: (object, attribute, replacement factory)
    "processor": (MultiModalRegistry, "create_processor", _fail_once_cache_filled),
    "runner_init": (GPUModelRunner, "__init__", lambda orig: _fail),
    "load_model": (GPUModelRunner, "load_model", lambda orig: _fail),
    "profile_run": (GPUModelRunner, "profile_run", _after),
    "kv_cache_init": (GPUModelRunner, "initialize_kv_cache", _after),
    "capture_model": (GPUModelRunner, "capture_model", _after),
    "scheduler_init": ("refimpl.core.sched.scheduler.Scheduler", "__init__", lambda orig: _fail),
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_fault_in_each_phase_leaves_nothing_behind(clean_first, monkeypatch, phase):
    from refimpl.core.sched import scheduler as sched_mod
    obj, attr, factory = PHASES[phase]
    obj = sched_mod.Scheduler if isinstance(obj, str) else obj
    runners: list[weakref.ref] = []
    orig_init = GPUModelRunner.__init__

    def tracking_init(self, cfg, *args, **kwargs):
        runners.append(weakref.ref(self))
        orig_init(self, cfg, *args, **kwargs)
    monkeypatch.setattr(GPUModelRunner, "__init__", tracking_init)
    held_at_reset: list[int] = []
    orig_reset = MultiModalRegistry.reset_processor_cache

    def recording_reset(self):
        held_at_reset.append(self.cache_bytes())
        orig_reset(self)
    monkeypatch.setattr(MultiModalRegistry, "reset_processor_cache", recording_reset)
    monkeypatch.setattr(obj, attr, factory(getattr(obj, attr)))
    engine, failed = None, None
    try:
        engine = LLMEngine.from_args("whisper-tiny", **ENGINE_KW)
    except InjectedFault as e:
        failed = str(e)
    assert engine is None and failed, f"start-up did not fail in {phase}"
    assert REG.cache_bytes() == 0 and len(REG.processing_cache) == 0
    if phase != "runner_init":  # the fault hit a filled cache, and the failure path emptied it
        assert held_at_reset and held_at_reset[-1] > 0, held_at_reset
    gc.collect()
    alive = [r() for r in runners if r() is not None]
    assert not alive, f"a half-built GPUModelRunner survived a fault in {phase}"


def test_startup_after_faults_equals_clean_first(clean_first):
    assert _report(LLMEngine.from_args("whisper-tiny", **ENGINE_KW)) == clean_first
    assert REG.cache_bytes() == 0


def _features(engine, audio):
    proc = REG.create_processor(engine.vllm_config.model_config, disable_cache=True)
    return proc.apply("", {"audio": [audio]}).mm_kwargs["audio"][0]["input_features"]


def test_refused_reset_keeps_cache_and_inputs_and_outputs():
    engine = LLMEngine.from_args("whisper-tiny", **ENGINE_KW)
    audios = make_request_audios(2, seed=11, max_s=4.0)
    fresh = [_features(engine, a) for a in audios]
    sp = [SamplingParams(max_tokens=n, ignore_eos=True) for n in (6, 3)]

    def serve(tag, attempt_resets):
        for i, (a, p) in enumerate(zip(audios, sp)):
            engine.add_request(f"{tag}{i}", {"multi_modal_data": {"audio": (a, 16000)}}, p)
        outs, refused = {}, 0
        while engine.has_unfinished_requests():
            if attempt_resets:
                entries, nbytes = list(REG.processing_cache._data), REG.cache_bytes()
                with pytest.raises(EngineStateError) as ei:
                    engine.reset_mm_cache()
                assert ei.value.field == "reset_mm_cache"
                refused += 1
                assert list(REG.processing_cache._data) == entries and REG.cache_bytes() == nbytes > 0
                in_flight = {r.external_req_id: r for r in engine.scheduler.requests.values()}
                for i in range(len(audios)):
                    req = in_flight.get(f"{tag}{i}")
                    if req is not None:  # still in flight: its input is intact
                        assert torch.equal(req.mm_inputs[0]["input_features"], fresh[i])
            for o in engine.step():
                outs[o.request_id[len(tag):]] = o.output_token_ids
        return outs, refused

    with_attempts, refused = serve("a", True)
    assert refused >= 3  # refused while waiting, while running, after one finished
    engine.reset_mm_cache()  # idle: allowed
    assert REG.cache_bytes() == 0
    without, _ = serve("b", False)
    assert with_attempts == without
    assert [len(with_attempts[str(i)]) for i in range(2)] == [6, 3]
    kv = engine.scheduler.kv_cache_manager
    assert kv.get_num_free_blocks() == kv.block_pool.num_gpu_blocks - 1
