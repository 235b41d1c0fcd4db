"""refimpl's conformance probe. Runs INSIDE an interpreter that has vLLM (a side venv or a
contributor's build): it imports nothing of refimpl and nothing vLLM does not bring.

``python probe.py SPEC.json``: SPEC names the model directories and the settings (refimpl's
``conform.grid`` writes it). One JSON object per line on stdout: ``meta`` first, then one
``qwen`` line per setting and one ``whisper`` line per Whisper setting. A field whose vLLM
internal is missing or raised is ``{"not_probed": "<why>"}``: the comparison counts it as a
difference, never as a pass.

Driven per Qwen2.5-VL setting (vLLM's own code, on CPU, no weights, no encoder forward):
the max-tokens lookup (``get_max_tokens_per_item_by_nonzero_modality``, ``..._by_modality``
from 0.13), ``compute_encoder_budget``, ``MultiModalBudget`` (0.10.1 on), and the release's
``GPUModelRunner.profile_run`` called unbound on a stub runner: its registry records
``get_decoder_dummy_data`` (the real HF call runs), its model stops at the encoder. The dummy
builders (``_get_dummy_images`` / ``_get_dummy_videos``) are recorded for shape and dtype,
``Qwen2_5_VLProcessor.__call__`` counted per phase. Whisper: ``get_encdec_max_encoder_len``,
``max_num_encoder_input_tokens`` after ``VllmConfig``, ``CrossAttentionSpec.max_memory_usage_bytes``.
Beside it, imported by its folder: probe_profile.py (the profile run's stand-ins), probe_configs.py
(vLLM's configs of a setting), probe_memory.py (resident bytes, the wait for memory).
"""
from __future__ import annotations

import json
import os
import sys
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # probe_*.py, beside this file

from probe_configs import _kwargs_for, model_config, scheduler_config, vllm_config  # noqa: E402
from probe_memory import RssPeak, wait_for_memory  # noqa: E402
from probe_profile import (  # noqa: E402
    COUNTERS,
    StopAtEncoder,
    cache_state,
    empty_cache,
    profile_run,
    registry,
    release_reset,
)

# The JSON lines go to the original stdout; everything else printed (vLLM's logs) to stderr.
_OUT = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)


def emit(obj: dict) -> None:
    _OUT.write(json.dumps(obj, default=str) + "\n")
    _OUT.flush()


def not_probed(e: BaseException) -> dict:
    last = traceback.extract_tb(e.__traceback__)[-1:] if e.__traceback__ else []
    where = f" at {os.path.basename(last[0].filename)}:{last[0].lineno}" if last else ""
    return {"not_probed": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}{where}"}


def field(out: dict, name: str, fn):
    try:
        out[name] = fn()
    except StopAtEncoder:
        raise
    except Exception as e:  # noqa: BLE001 - any failure is recorded, never a pass
        out[name] = not_probed(e)
    return out[name]


def needed(out: dict, name: str, fn):
    """``fn()``, a config the setting's other fields need; None when it failed, ``out[name]`` then
    saying why (and the setting ends there)."""
    value = field(out, name, fn)
    if isinstance(value, dict):
        return None
    del out[name]
    return value


def lookup(mc, reg=None):
    reg = reg or registry()
    if hasattr(reg, "get_max_tokens_per_item_by_nonzero_modality"):
        return dict(reg.get_max_tokens_per_item_by_nonzero_modality(mc))
    out = dict(reg.get_max_tokens_per_item_by_modality(mc))
    limits = reg.get_mm_limits_per_prompt(mc) if hasattr(reg, "get_mm_limits_per_prompt") else {}
    return {m: n for m, n in out.items() if n > 0 and limits.get(m, 1) > 0}


def encoder_budget(mc, sc):
    from vllm.v1.core.encoder_cache_manager import compute_encoder_budget
    return list(compute_encoder_budget(mc, sc, registry()))


# ----------------------------------------------------------------------------- per setting
def probe_qwen(path: str, s: dict) -> dict:
    """One Qwen2.5-VL setting in the release's start-up order: the registry's cache emptied, the
    runner's budget (``runner_init``), ``profile_run`` (``profile_run``), the scheduler's budget
    (``scheduler_init``), the reset (``reset_mm_cache``); ``startup`` holds per phase the HF calls
    with and without items, cache hits, misses and stores, and the entries and bytes held after it.
    The max-tokens lookup runs after the start-up (a lookup-only setting: between the budgets, no
    ``startup`` record)."""
    out: dict = {"kind": "qwen", "setting": s}
    if (mc := needed(out, "_model_config", lambda: model_config(path, s))) is None or \
            (sc := needed(out, "_scheduler_config", lambda: scheduler_config(mc, s))) is None:
        return out
    full = not s.get("lookup_only")
    startup: dict = {}
    empty_cache(mc)  # a fresh start-up: nothing a previous setting processed is cached
    phase = Phase(startup)
    budget_obj = None
    try:
        from vllm.v1.worker.utils import MultiModalBudget  # noqa: F401  (0.10.1 on)
        have_budget = True
    except ImportError:
        have_budget = False
    if have_budget:
        def make_budget():
            nonlocal budget_obj
            from vllm.v1.worker.utils import MultiModalBudget
            budget_obj = MultiModalBudget(mc, sc, registry())
            return {"encoder_compute_budget": budget_obj.encoder_compute_budget,
                    "encoder_cache_size": budget_obj.encoder_cache_size,
                    "max_items_per_batch": dict(budget_obj.max_items_per_batch_by_modality)}
        field(out, "mm_budget", make_budget)
    else:
        field(out, "runner_encoder_budget", lambda: encoder_budget(mc, sc))
    phase.end("runner_init")
    if full:
        field(out, "profile", lambda: profile_run(mc, sc, budget_obj, out.get("runner_encoder_budget")))
        phase.end("profile_run")
    else:
        field(out, "max_tokens_per_item", lambda: lookup(mc))
    phase.begin()
    field(out, "encoder_budget", lambda: encoder_budget(mc, sc))  # the scheduler's call
    phase.end("scheduler_init")
    if full:
        field(phase.notes, "reset", lambda: release_reset(mc))
        phase.end("reset_mm_cache")
        out["hf_passes"] = {p: startup[p]["hf_calls_with_items"] for p in ("runner_init", "scheduler_init", "profile_run")}
        out["startup"] = startup if phase.ok else phase.error
        field(out, "max_tokens_per_item", lambda: lookup(mc))
    return out


class Phase:
    """Per-phase deltas of COUNTERS and the cache's state at the end of each phase, into ``record``;
    ``error`` the first failure to read the cache (the release keeps it elsewhere)."""

    def __init__(self, record: dict):
        self.record, self.notes = record, {}  # type: dict, dict
        self.error: "dict | None" = None
        self.begin()

    @property
    def ok(self) -> bool:
        return self.error is None

    def begin(self) -> None:
        self.start = COUNTERS.snapshot()

    def end(self, name: str) -> None:
        now = COUNTERS.snapshot()
        rec = {k: now[k] - self.start[k] for k in now}
        try:
            rec.update(cache_state())
        except Exception as e:  # noqa: BLE001 - recorded, never a pass
            self.error = self.error or not_probed(e)
        if "reset" in self.notes:
            rec["reset_called"] = self.notes.pop("reset")
        self.record[name] = rec
        self.begin()


def probe_whisper(path: str, s: dict) -> dict:
    out: dict = {"kind": "whisper", "setting": s}
    if (mc := needed(out, "_model_config", lambda: model_config(path, s))) is None:
        return out
    field(out, "encdec_max_encoder_len", lambda: registry().get_encdec_max_encoder_len(mc))
    if (vc := needed(out, "_vllm_config", lambda: vllm_config(mc, s))) is None:
        return out
    field(out, "max_num_encoder_input_tokens", lambda: vc.scheduler_config.max_num_encoder_input_tokens)
    field(out, "cross_attention", lambda: cross_attention(vc, s))
    return out


def cross_attention(vc, s: dict) -> dict:
    import torch
    from vllm.v1.kv_cache_interface import CrossAttentionSpec
    hf = vc.model_config.hf_config
    heads = hf.decoder_attention_heads
    kw = dict(block_size=s["block_size"], num_kv_heads=heads, head_size=hf.d_model // heads,
              dtype=torch.float16, use_mla=False)
    spec = CrossAttentionSpec(**_kwargs_for(CrossAttentionSpec, kw))
    nbytes = spec.max_memory_usage_bytes(vc)
    return {"max_memory_usage_bytes": nbytes, "page_size_bytes": spec.page_size_bytes,
            "blocks": nbytes // spec.page_size_bytes}


def meta() -> dict:
    import importlib.metadata as md
    out: dict = {"kind": "meta", "python": sys.version.split()[0]}
    for dist in ("vllm", "transformers", "tokenizers", "huggingface-hub", "torch"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    import vllm
    out["vllm_module"] = getattr(vllm, "__version__", None)
    return out


def run_setting(probe, folder: str, s: dict, spec: dict, rss: "RssPeak") -> dict:
    """``probe(folder, s)`` once its predicted peak fits (spec's ``predicted_peak`` by setting id);
    the line records the wait and its resident bytes (``rss``)."""
    need = spec.get("predicted_peak", {}).get(s["id"])
    waited = None
    if need:
        try:
            waited = wait_for_memory(need, rss, spec.get("memory_wait_s", 600))
        except MemoryError as e:
            return {"kind": "qwen" if probe is probe_qwen else "whisper", "setting": s,
                    "_memory": not_probed(e)}
    rss.take()
    out = probe(folder, s)
    return {**out, "rss": {**rss.take(), "waited_s": waited}}


def main(argv: list[str]) -> int:
    spec = json.loads(open(argv[1]).read())
    emit(meta())
    COUNTERS.install()
    rss = RssPeak()
    for s in spec.get("qwen", []):
        emit(run_setting(probe_qwen, spec["qwen_dir"], s, spec, rss))
    for s in spec.get("whisper", []):
        emit(run_setting(probe_whisper, spec["whisper_dir"], s, spec, rss))
    emit({"kind": "end"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
