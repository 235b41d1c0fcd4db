"""Peak resident bytes of a start-up, by what holds them, from its StartupPlan.

The plan counts the exact bytes (dummy arrays, the hasher's copies, the processing cache, the
KV cache, the profile run's encoder batch); ``MemoryRates`` prices what it cannot count (the
interpreter and libraries, the HF call's working set, activations). One model for the benches'
guard (its default rates, or this machine's calibration) and the cost model (the calibration).
No vLLM counterpart (vLLM sizes the KV cache from free GPU memory after its profile run).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import psutil

from refimpl.engine.startup_plan import Item, StartupPlan, Step
from refimpl.errors import InsufficientMemoryError
from refimpl.multimodal.hash_paths import HASH_COPIES

GiB = 1 << 30


@dataclass(frozen=True)
class MemoryRates:
    """Resident bytes beyond what the plan counts exactly: ``base`` (interpreter, torch,
    transformers, the small engine), the model's ``weights`` at the kit's scale, per KV byte, per
    element of the HF call's working set by item dtype ("pil": per pixel), the hasher's peak per
    item byte by "<byte path>.<kind>", the encoder per token (per audio item), the text dummy run.
    The defaults are the benches' guard model without a calibration (``base`` calibrated on peak
    RSS of ``bench startup --calls 2`` at 50k; weights, image, encoder and dummy run inside it);
    the cost model's come from ``refimpl bench calibrate``."""
    base: int = 9 * GiB // 4
    weights: int = 0
    kv_per_byte: float = 1.0
    hf_per_element: tuple[tuple[str, float], ...] = (("int64", 18.0), ("uint8", 11.0), ("pil", 0.0))
    hf_per_out_element: tuple[tuple[str, float], ...] = ()  # a video's per padded output element, by dtype
    hash_peak: tuple[tuple[str, float], ...] = tuple(
        (f"{p}.{k}", float(n)) for p, d in HASH_COPIES.items() for k, n in d.items())
    encoder_per_token: float = 0.0  # bytes per token of a frame pair (an image) of ``encoder_tokens``
    encoder_per_audio: float = 0.0
    dummy_run: int = 0
    encoder_tokens: int = 0
    encoder_per_token_large: float = 0.0  # the same at a pair of ``encoder_large_tokens`` (0: not measured)
    encoder_large_tokens: int = 0

    def encoder_bytes_per_token(self, pair_tokens: float) -> float:
        """Activation bytes per token of a frame pair (an image) of ``pair_tokens``: ``encoder_per_token``
        up to ``encoder_tokens``, ``encoder_per_token_large`` from ``encoder_large_tokens`` on, linear
        in log2(tokens) between."""
        lo, hi = self.encoder_tokens, self.encoder_large_tokens
        if not (self.encoder_per_token_large and 0 < lo < hi):
            return self.encoder_per_token
        x = min(1.0, max(0.0, math.log2(max(pair_tokens, 1) / lo) / math.log2(hi / lo)))
        return self.encoder_per_token + x * (self.encoder_per_token_large - self.encoder_per_token)

    def hf_working_set(self, i: Item) -> float:
        """Bytes the HF call holds for item ``i`` beyond the item itself (audio: its float64
        copy and the features twice): per input element, and for a video per element of its frames
        padded to the temporal patch (a lone frame's pad holds float copies too)."""
        if i.modality == "audio":
            return i.nbytes + 2 * i.processed_bytes
        if i.modality == "image":
            return i.elements // 3 * dict(self.hf_per_element)["pil"]
        out = dict(self.hf_per_out_element).get(i.dtype, 0.0) * i.out_mp * 3e6
        return i.elements * dict(self.hf_per_element)[i.dtype] + out

    def hash_bytes(self, i: Item, byte_path: str) -> float:
        """Bytes the hasher holds for item ``i`` at once on ``byte_path``."""
        return i.nbytes * dict(self.hash_peak)[f"{byte_path}.{i.kind}"]


def _step(s: Step, plan: StartupPlan, r: MemoryRates) -> dict[str, float]:
    """What a step holds beyond the base at its peak: hashing and the HF call run one after the other."""
    if s.built == "processed":
        return {"dummy arrays": sum(i.processed_bytes for i in s.items)}
    live = sum({i.spec: i.nbytes for i in s.items}.values())  # the builders repeat one object
    path = plan.variant.mm.hash_byte_path
    hashing = max((r.hash_bytes(i, path) for i in s.items), default=0.0) if s.hashed else 0.0
    hf = sum(r.hf_working_set(i) for i in s.hf_items)
    return {"dummy arrays": live, "hash copies" if hashing > hf else "HF working set": max(hashing, hf)}


def _encoder(plan: StartupPlan, r: MemoryRates) -> dict[str, float]:
    """The profile run's encoder: its input batch (torch.cat of the item) and activations, and the
    processed item itself when no cache kept it."""
    i, n = plan.profile_item, plan.encoder_items
    assert i is not None
    prof = [s for s in plan.steps if s.phase == "profile_run"]
    kept = bool(prof) and prof[-1].cache_on and prof[-1].cache_after >= i.processed_bytes
    act = n * (r.encoder_per_audio if i.modality == "audio" else
               i.tokens * r.encoder_bytes_per_token(i.tokens / i.frame_pairs) + i.processed_bytes)
    return {"processing cache held": prof[-1].cache_after if prof else 0,
            "encoder batch and activations": act + (0 if kept else i.processed_bytes)}


def peaks(plan: StartupPlan, r: MemoryRates) -> list[tuple[str, dict[str, int]]]:
    """(moment, resident bytes by holder) of every step, the profile run's encoder and text dummy
    run, and the end of start-up (before the reset); a budget experiment: its calls only."""
    budget = plan.calls is not None
    weights = {"base (imports, weights)": r.base + r.weights, "full-scale weights": plan.extra_weight_bytes}
    kv = {"KV cache": plan.kv_bytes * r.kv_per_byte}
    out: list[tuple[str, dict[str, float]]] = []
    for s in plan.steps:
        loaded = not budget and s.phase != "runner_init"
        held = weights if loaded else {"base (imports)": r.base}
        out.append((s.name, {**held, **(kv if s.phase == "scheduler_init" else {}),
                             "processing cache held": s.cache_before, **_step(s, plan, r)}))
    if not budget:
        if plan.profile_item is not None:
            out.append(("profile_run encoder", {**weights, **_encoder(plan, r)}))
        prof = [s.cache_after for s in plan.steps if s.phase == "profile_run"]
        out.append(("profile_run text dummy run", {**weights, "processing cache held": prof[-1] if prof else 0,
                                                   "text dummy run": r.dummy_run}))
        out.append(("end of start-up", {**weights, **kv, "processing cache held": plan.cache_bytes_before_reset}))
    if not out:
        out.append(("start", {"base (imports)": r.base}))
    return [(name, {k: int(x) for k, x in held.items() if x}) for name, held in out]


def peak_bytes_by_holder(plan: StartupPlan, rates: Optional[MemoryRates] = None) -> tuple[str, dict[str, int]]:
    """The largest of ``peaks`` (default rates: MemoryRates()): (moment, bytes by holder); the sum
    of its values is the predicted peak RSS."""
    return max(peaks(plan, rates or MemoryRates()), key=lambda p: sum(p[1].values()))


def peak_bytes(plan: StartupPlan, rates: Optional[MemoryRates] = None) -> int:
    return sum(peak_bytes_by_holder(plan, rates)[1].values())


def memory_field(mm_processor_kwargs: dict) -> str:
    """The setting a start-up memory refusal names: the user's ``max_pixels`` (the dummy items' size)
    when set, else ``max_model_len``."""
    return "mm_processor_kwargs[max_pixels]" if "max_pixels" in mm_processor_kwargs else "max_model_len"


def check_fits_in_ram(plan: StartupPlan, mm_processor_kwargs: dict, total: Optional[int] = None) -> int:
    """The plan's predicted peak RSS (bytes, default rates). Raises InsufficientMemoryError before
    start-up when it exceeds the machine's RAM (``total``, default psutil's): such a start-up can only be
    killed by the kernel. Names ``mm_processor_kwargs[max_pixels]`` when the user set it, else
    ``max_model_len``; what is free right now is the benchmarks' guard's check (refimpl.lab.bench.guard)."""
    at, held = peak_bytes_by_holder(plan)
    need = sum(held.values())
    total = psutil.virtual_memory().total if total is None else total
    if need <= total:
        return need
    field = memory_field(mm_processor_kwargs)
    top = ", ".join(f"{k} {b / 2**30:.1f}" for k, b in sorted(held.items(), key=lambda kv: -kv[1])[:3])
    raise InsufficientMemoryError(field, total, f"start-up of {plan.variant.name} would peak at about "
                                  f"{need / 2**30:.1f} GiB of host memory ({at}: {top} GiB), more than this "
                                  f"machine's {total / 2**30:.1f} GiB of RAM")
