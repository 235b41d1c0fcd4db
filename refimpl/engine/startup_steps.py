"""The steps of a start-up's plan: EngineCore's phases, the passes that process dummy items, the items.

Ours (vLLM has none), read by refimpl.engine.startup_plan.StartupPlan: ``STARTUP_STEPS`` is the pass
table (vLLM's callers of ``compute_encoder_budget`` and ``get_decoder_dummy_data`` during start-up),
``Item`` one dummy item as the row builds it, ``Step`` what one pass does with its items, and
``walk`` runs the passes through one fresh process's ProcessingCache, fed with sizes only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, Sequence

from refimpl.errors import CacheItemTooLargeError
from refimpl.multimodal import encoder_budget as eb
from refimpl.multimodal.cache import ProcessingCache
from refimpl.variants import StartupVariant

# EngineCore's phases in order; reset_mm_cache follows them under a row that resets
PHASES = ("runner_init", "load_model", "profile_run", "kv_cache_init", "capture_model", "scheduler_init")
RESET_PHASE = "reset_mm_cache"
# ours, before PHASES: EngineCore's refusals (encoder length, RAM), timed so that the phases cover EngineCore()
CHECK_PHASE = "startup_checks"


@dataclass(frozen=True)
class StartupStep:
    """One step of the pass table: its phase, vLLM's caller, and ``kind``: ``lookup`` (max tokens
    per item, one item per enabled modality at max_model_len) or ``dummy`` (the profile run's
    item). ``when``: the StartupVariant flag it needs (None: every row)."""
    phase: str
    pass_no: str
    caller: str
    kind: Literal["lookup", "dummy"]
    when: Optional[str] = None


STARTUP_STEPS = (
    StartupStep("runner_init", "#1", "GPUModelRunner.__init__: compute_encoder_budget "
                "(MultiModalBudget from 0.10.1)", "lookup"),
    StartupStep("profile_run", "#2", "profile_run: the lookup again, to pick the largest "
                "modality (until 0.10.0)", "lookup", when="profile_run_lookup"),
    StartupStep("profile_run", "#3", "profile_run: get_decoder_dummy_data, replicated up to "
                "the encoder budget and encoded", "dummy"),
    StartupStep("scheduler_init", "#5", "Scheduler.__init__: compute_encoder_budget", "lookup"),
)


@dataclass(frozen=True)
class Item:
    """One dummy item: ``spec`` (worst_case's tuple), ``shape`` and ``dtype`` as built (PIL RGB
    image (H, W, 3) uint8, video (T, H, W, 3) in the row's dtype, audio (N,)), ``nbytes``; ``kind``
    of its hash byte path; megapixels in and out of the HF processor (video: frames, then frames
    padded to the temporal patch); ``elements``; ``processed_bytes``; placeholder ``tokens``."""
    spec: tuple
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    kind: Literal["ndarray", "image"]
    in_mp: float
    out_mp: float
    elements: int
    processed_bytes: int
    tokens: int

    @property
    def modality(self) -> str:
        return self.spec[0]

    @property
    def frame_pairs(self) -> int:
        """Frame pairs of a video (the vision tower attends within one; temporal patch 2), else 1."""
        return -(-self.shape[0] // 2) if self.modality == "video" and len(self.shape) == 4 else 1


@dataclass
class Step:
    """What one pass does: ``built`` "raw" (dummy data), "processed" (shape-only zeros); ``hits``
    per item; ``hf_items`` processed by its one HF call; ``stored`` items the cache took; cache
    bytes before and after (bytes)."""
    phase: str
    name: str
    items: tuple[Item, ...]
    built: Literal["raw", "processed"]
    cache_on: bool
    hashed: bool
    hits: tuple[bool, ...] = ()
    hf_items: tuple[Item, ...] = ()
    stored: tuple[Item, ...] = ()
    text_only_calls: int = 0
    cache_before: int = 0
    cache_after: int = 0

    @property
    def hashed_bytes(self) -> int:
        return sum(i.nbytes for i in self.items) if self.hashed else 0


def make_item(info, spec: tuple, v: StartupVariant) -> Item:
    """The Item a dummy of ``spec`` is under row ``v``, from the processing info's size functions."""
    if spec[0] == "audio":
        adt: str = v.mm.dummy_audio_dtype
        return Item(spec, (spec[1],), adt, spec[1] * (8 if adt == "float64" else 4), "ndarray", 0.0, 0.0, spec[1],
                    info.get_processed_item_bytes(spec), info.get_item_tokens(spec))
    frames, w, h = (1, *spec[1:]) if spec[0] == "image" else spec[1:]
    (rw, rh), tokens = info.get_vision_info(w, h, frames)
    dt = "uint8" if spec[0] == "image" else v.mm.dummy_video_dtype
    tps = info._vision()[2]
    padded = tps if spec[0] == "image" else -(-frames // tps) * tps
    shape = (h, w, 3) if spec[0] == "image" else (frames, h, w, 3)
    return Item(spec, shape, dt, frames * w * h * 3 * (8 if dt == "int64" else 1),
                "image" if spec[0] == "image" else "ndarray", frames * w * h / 1e6, padded * rw * rh / 1e6,
                frames * w * h * 3, info.get_processed_item_bytes(spec), tokens)


def walk(mc, v: StartupVariant, todo: Sequence[tuple[str, str, str, list[Item]]]):
    """Steps of ``todo`` (phase, name, kind, items) through one fresh process's ProcessingCache;
    the first CacheItemTooLargeError (an oversize item under ``oversize_item`` "raise") ends them."""
    cache, decoder_only = ProcessingCache(mc.mm_cache_bytes), not mc.is_encoder_decoder
    steps: list[Step] = []
    for phase, name, kind, items in todo:
        if kind == "dummy" and v.mm.shape_only:
            steps.append(Step(phase, name, tuple(items), "processed", False, False,
                              cache_before=cache.bytes, cache_after=cache.bytes))
            continue
        on = eb.cache_on(v, mc, phase)
        held = cache.bytes
        hits = tuple(on and cache.get(repr(i.spec)) is not None for i in items)
        missing = tuple(i for i, hit in zip(items, hits) if not hit)
        step = Step(phase, name, tuple(items), "raw", on, on or v.mm.hash_uncached, hits, missing, (),
                    (decoder_only + (not missing)) if on else 0, held, held)
        steps.append(step)
        if on:
            try:
                step.stored = tuple(i for i in missing if cache.put(
                    repr(i.spec), {}, v.mm.oversize_item, nbytes=i.processed_bytes))
            except CacheItemTooLargeError as e:
                return steps, e
        step.cache_after = cache.bytes
    return steps, None
