"""The start-up cost model's plan: what each start-up pass builds, hashes, processes, stores and
frees, from the configs alone (no HF pass, nothing allocated); refimpl/lab/explore/cost_model.py
prices it (docs/cost-model.md).

``startup_plan`` walks the row's steps (worst_case.STARTUP_STEPS) through one process's LRU
processing cache, ``budget_plan`` the budget experiment's calls: the dummy items (bytes of the
row's dtype), hits and misses, HF calls, hash copies, the cache bytes before the reset and what
the reset frees in each process. Their counts equal the committed runs' (tests/core/test_cost_model.py).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Optional

from refimpl.lab.bench.memory import HASH_COPIES
from refimpl.multimodal import worst_case as wc
from refimpl.multimodal.registry import MultiModalRegistry
from refimpl.variants import StartupVariant, get_startup_variant
from refimpl.worker.gpu_model_runner import GPUModelRunner

GiB = 1 << 30
REGISTRY = MultiModalRegistry(cache_bytes=0)  # processors for the item sizes; no cache, nothing global


@dataclass(frozen=True)
class Item:
    """One dummy item: ``spec`` (worst_case's tuple), ``nbytes`` as built (PIL RGB, the row's video
    or audio dtype), ``kind`` of its hash byte path, megapixels in and out of the HF processor
    (video: frames, then frames padded to the temporal patch), processed bytes, tokens."""
    spec: tuple
    dtype: str
    nbytes: int
    kind: str
    in_mp: float
    out_mp: float
    elements: int
    processed_bytes: int
    tokens: int

    @property
    def modality(self) -> str:
        return self.spec[0]


@dataclass
class Step:
    """What one pass does: ``built`` "raw" (dummy data), "processed" (shape-only zeros) or "none";
    ``hits`` per item; ``hf_items`` processed by the HF call; bytes stored and held."""
    phase: str
    name: str
    items: tuple[Item, ...]
    built: str
    cache_on: bool
    hashed: bool
    hits: tuple[bool, ...] = ()
    hf_items: tuple[Item, ...] = ()
    text_only_calls: int = 0
    cache_before: int = 0
    cache_after: int = 0
    first_use: bool = False

    @property
    def hashed_bytes(self) -> int:
        return sum(i.nbytes for i in self.items) if self.hashed else 0


@dataclass
class Plan:
    """A start-up (``calls`` None) or a budget experiment of ``calls`` lookups, step by step."""
    model: str
    variant: StartupVariant
    steps: list[Step]
    hash_copies: dict[str, int]
    encoder_items: int = 0
    profile_item: Optional[Item] = None
    kv_bytes: int = 0
    kv_registry_calls: int = 0
    calls: Optional[int] = None
    failure: Optional[str] = None

    @property
    def family(self) -> str:
        return "qwen2.5-vl-3b" if self.model.startswith("qwen") else "whisper-tiny"

    @property
    def cache_bytes_before_reset(self) -> int:
        return self.steps[-1].cache_after if self.steps else 0

    def reset_frees(self) -> dict[str, tuple[int, int]]:
        """(cache bytes before the reset, bytes the reset frees) per process: in-process, and with
        V1 multiprocessing the front end (P0: no profiling) and the engine core (P1: the
        profiling passes' cache, freed only under reset_scope "all")."""
        b, v = self.cache_bytes_before_reset, self.variant
        return {"in-process engine": (b, b if v.reset_at_end else 0), "P0 front end (mp)": (0, 0),
                "P1 engine core (mp)": (b, b if v.reset_at_end and v.reset_scope == "all" else 0)}

    def hf_passes_by_phase(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.steps:
            out[s.phase] = out.get(s.phase, 0) + bool(s.hf_items)
        return out

    @property
    def hf_processor_calls(self) -> int:
        return sum(bool(s.hf_items) + s.text_only_calls for s in self.steps)

    @property
    def cache_hits(self) -> int:
        return sum(sum(s.hits) for s in self.steps if s.cache_on)

    @property
    def cache_misses(self) -> int:
        return sum(len(s.hits) - sum(s.hits) for s in self.steps if s.cache_on)


def _item(info, spec: tuple, v: StartupVariant) -> Item:
    if spec[0] == "audio":
        adt: str = v.mm.dummy_audio_dtype
        return Item(spec, adt, spec[1] * (8 if adt == "float64" else 4), "ndarray", 0.0, 0.0, spec[1],
                    info.get_processed_item_bytes(spec), info.get_item_tokens(spec))
    frames, w, h = (1, *spec[1:]) if spec[0] == "image" else spec[1:]
    (rw, rh), tokens = info.get_vision_info(w, h, frames)
    dt = "uint8" if spec[0] == "image" else v.mm.dummy_video_dtype
    tps = info._vision()[2]
    padded = tps if spec[0] == "image" else -(-frames // tps) * tps
    return Item(spec, dt, frames * w * h * 3 * (8 if dt == "int64" else 1), "image" if spec[0] == "image" else "ndarray",
                frames * w * h / 1e6, padded * rw * rh / 1e6, frames * w * h * 3,
                info.get_processed_item_bytes(spec), tokens)


def _walk(mc, v: StartupVariant, todo: list[tuple[str, str, str, list[Item]]]) -> tuple[list[Step], Optional[str]]:
    """Steps of ``todo`` (phase, name, kind, items) through one process's LRU processing cache;
    the first failure (an oversize item under ``oversize_item`` "raise") ends them."""
    capacity, decoder_only = mc.mm_cache_bytes, not mc.is_encoder_decoder
    user_cache = not mc.disable_mm_preprocessor_cache and capacity > 0
    cache: OrderedDict[tuple, int] = OrderedDict()
    steps, first = [], True
    for phase, name, kind, items in todo:
        if kind == "dummy" and v.mm.shape_only:
            steps.append(Step(phase, name, tuple(items), "processed", False, False,
                              cache_before=sum(cache.values()), cache_after=sum(cache.values())))
            continue
        on = {"off": False, "registry": capacity > 0,
              "runner": user_cache and phase != "scheduler_init"}[v.profiling_cache]
        held = sum(cache.values())
        hits = tuple(on and i.spec in cache for i in items)
        for i, hit in zip(items, hits):
            if hit:
                cache.move_to_end(i.spec)
        missing = tuple(i for i, hit in zip(items, hits) if not hit)
        step = Step(phase, name, tuple(items), "raw", on, on or v.mm.hash_uncached, hits, missing,
                    (decoder_only + (not missing)) if on else 0, held, held, first)
        first = False
        steps.append(step)
        for i in missing if on else ():
            if i.processed_bytes > capacity:
                if v.mm.oversize_item == "raise":
                    return steps, (f"{name}: ValueError value too large: one processed {i.modality} item of "
                                   f"{i.processed_bytes / GiB:.2f} GiB exceeds mm_processor_cache_gb "
                                   f"{capacity / GiB:g}")
                continue
            cache[i.spec] = i.processed_bytes
            while sum(cache.values()) > capacity:
                cache.popitem(last=False)
        step.cache_after = sum(cache.values())
    return steps, None


def _copies(v: StartupVariant) -> dict[str, int]:
    return {"ndarray": HASH_COPIES[v.mm.hash_byte_path],
            "image": {"v0.8.5": 1, "v0.9.0": 6, "v0.9.2": 4, "stream": 1}[v.mm.hash_byte_path]}


def startup_plan(vllm_config, variant: str | StartupVariant = "refimpl") -> Plan:
    """The passes of ``EngineCore(vllm_config, variant)`` in the model's own order (no HF pass,
    nothing allocated). Raises UnknownVariantError for an unknown row."""
    v = get_startup_variant(variant) if isinstance(variant, str) else variant
    mc, sc = vllm_config.model_config, vllm_config.scheduler_config
    info = REGISTRY.create_processor(mc, disable_cache=True, switches=v.mm).info
    dummy = wc.profile_dummy(mc, sc, v, mm_registry=REGISTRY)
    lookup = [_item(info, s, v) for s in wc.lookup_specs(mc, v, REGISTRY)]
    todo: list[tuple[str, str, str, list[Item]]] = []
    for st in wc.STARTUP_STEPS:
        if (st.when and not getattr(v, st.when)) or (st.kind == "lookup" and v.uses_formula(mc.model)) or not dummy:
            continue
        todo.append((st.phase, f"{st.pass_no} {st.caller.split(':')[0]}", st.kind,
                     lookup if st.kind == "lookup" else [_item(info, dummy.spec, v)]))
    steps, failure = _walk(mc, v, todo)
    runner = GPUModelRunner(vllm_config)  # its KV arithmetic only: no model, nothing allocated
    cc = vllm_config.cache_config
    blocks = cc.num_gpu_blocks or cc.kv_cache_memory_bytes // runner.bytes_per_block()
    kv_calls = 0
    if mc.is_encoder_decoder:  # vLLM 0.10.2's KV check and runner read the registry (ENCODER_LEN_SITES)
        kv_calls = (runner.get_kv_cache_shape()[0] + 1) * (vllm_config.encoder_len_source("kv_cache") == "registry") \
            + (vllm_config.encoder_len_source("runner") == "registry")
    return Plan(mc.model, v, steps, _copies(v), dummy.items if dummy else 0,
                _item(info, dummy.spec, v) if dummy else None, blocks * runner.bytes_per_block(), kv_calls,
                failure=failure)


def budget_plan(model_config, variant: str | StartupVariant, calls: int = 2) -> Plan:
    """``calls`` successive ``compute_encoder_budget`` lookups in one fresh process (the
    reviewer's experiment, ``refimpl bench startup --calls N``); none under the row's formula."""
    v = get_startup_variant(variant) if isinstance(variant, str) else variant
    info = REGISTRY.create_processor(model_config, disable_cache=True, switches=v.mm).info
    lookup = [_item(info, s, v) for s in wc.lookup_specs(model_config, v, REGISTRY)]
    todo = [] if v.uses_formula(model_config.model) else \
        [(f"call_{i + 1}", f"call {i + 1}", "lookup", lookup) for i in range(calls)]
    budget_row = replace(v, profiling_cache="registry" if v.cache_during_profiling else "off")
    steps, failure = _walk(model_config, budget_row, todo)
    return Plan(model_config.model, v, steps, _copies(v), calls=calls, failure=failure)
