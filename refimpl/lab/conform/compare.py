"""The probe's answers against the oracles of a row, field by field, setting by setting.

``flatten`` turns a probe line into fields (``max_tokens_per_item``, ``profile.seq_len`` ...);
``expected`` asks refimpl's oracles (refimpl.testing) the same for a row; ``compare`` lists per
setting and field: equal, differs, known (a KNOWN rule with its reason) or not probed (a
failure). ``nearest`` ranks every release row for a build of unknown version.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Optional

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.core.encoder_cache_manager import compute_mm_encoder_budget
from refimpl.core.kv_cache_utils import cross_attention_sizing
from refimpl.lab.conform.grid import WHISPER, Setting
from refimpl.multimodal import worst_case as wc
from refimpl.multimodal.encoder_budget import max_items_per_batch
from refimpl.testing import oracles
from refimpl.variants import ENCODER_LEN_VARIANTS, RELEASE_ROWS, STARTUP_VARIANTS

NOT_PROBED = "not probed"
# field -> the docs table's column
GROUPS = {"max_tokens_per_item": "max tokens per item", "encoder_budget": "encoder budget",
          "mm_budget.encoder_budget": "MultiModalBudget", "mm_budget.max_items_per_batch": "MultiModalBudget",
          "profile.modality": "profile modality / items / seq_len", "profile.items": "profile modality / items / seq_len",
          "profile.seq_len": "profile modality / items / seq_len", "profile.tokens": "processed grid (tokens)",
          "profile.raw_shape": "raw dummy shape", "profile.raw_dtype": "raw dummy dtype",
          "hf_passes": "HF passes by phase", "encdec_max_encoder_len": "Whisper encoder length",
          "max_num_encoder_input_tokens": "Whisper encoder length", "cross_attention_blocks": "cross-attention blocks (KV spec)"}
# the start-up in vLLM's order: ``startup.<phase>.<counter>`` (oracles.processing_cache_by_phase)
STARTUP_GROUPS = {"hf_calls_with_items": "start-up HF calls by phase", "hf_calls_text_only": "start-up HF calls by phase",
                  "cache_hits": "cache hits / misses / stores by phase", "cache_misses": "cache hits / misses / stores by phase",
                  "cache_stores": "cache hits / misses / stores by phase",
                  "cache_entries": "cache entries / bytes by phase", "cache_bytes": "cache entries / bytes by phase",
                  "cache_entries_by_modality": "cache entries / bytes by phase"}
GROUPS.update({f"startup.{p}.{c}": g for p in oracles.CACHE_PHASES for c, g in STARTUP_GROUPS.items()})


def _np(v: Any) -> Optional[str]:
    return v["not_probed"] if isinstance(v, dict) and "not_probed" in v else None


def flatten(line: dict) -> dict[str, Any]:
    """A probe line's fields; a field vLLM could not answer is ``{"not probed": why}``."""
    out: dict[str, Any] = {}
    for k in ("_memory", "_model_config", "_scheduler_config", "_vllm_config"):
        if k in line:
            out["setup"] = {NOT_PROBED: _np(line[k])}
    for k in ("max_tokens_per_item", "encdec_max_encoder_len", "max_num_encoder_input_tokens"):
        if k in line:
            out[k] = {NOT_PROBED: _np(line[k])} if _np(line[k]) else line[k]
    if "encoder_budget" in line:
        out["encoder_budget"] = {NOT_PROBED: _np(line["encoder_budget"])} if _np(line["encoder_budget"]) \
            else list(line["encoder_budget"])
    if "mm_budget" in line:
        b = line["mm_budget"]
        bad = _np(b)
        out["mm_budget.encoder_budget"] = {NOT_PROBED: bad} if bad else [b["encoder_compute_budget"], b["encoder_cache_size"]]
        out["mm_budget.max_items_per_batch"] = {NOT_PROBED: bad} if bad else b["max_items_per_batch"]
    if "cross_attention" in line:
        c = line["cross_attention"]
        out["cross_attention_blocks"] = {NOT_PROBED: _np(c)} if _np(c) else c["blocks"]
    if "profile" in line:
        p, bad = line["profile"], _np(line["profile"])
        if bad:
            for k in ("modality", "items", "seq_len", "tokens", "raw_shape", "raw_dtype"):
                out[f"profile.{k}"] = {NOT_PROBED: bad}
        else:
            m = p["modality"]
            raw = [r for r in p["raw"] if r["modality"] == m]
            out["profile.modality"], out["profile.items"] = m, p["items"]
            out["profile.seq_len"] = p["calls"][-1]["seq_len"] if p["calls"] else {NOT_PROBED: "no dummy call"}
            out["profile.tokens"] = math.prod(p["grid"][0]) // 4 if p["grid"] else {NOT_PROBED: "no grid"}
            out["profile.raw_shape"] = raw[-1]["shape"] if raw else {NOT_PROBED: "no raw dummy recorded"}
            out["profile.raw_dtype"] = raw[-1]["dtype"] if raw else {NOT_PROBED: "no raw dummy recorded"}
    if "hf_passes" in line:
        out["hf_passes"] = line["hf_passes"]
    if "startup" in line:
        bad = _np(line["startup"])
        for phase in oracles.CACHE_PHASES:
            rec = {} if bad else line["startup"].get(phase, {})
            for c in STARTUP_GROUPS:
                out[f"startup.{phase}.{c}"] = rec[c] if c in rec else \
                    {NOT_PROBED: bad or f"the probe recorded no {c} after {phase}"}
    return out


def _startup(vc: VllmConfig, row: str) -> dict[str, Any]:
    """``startup.<phase>.<counter>``: the oracle's processing cache in vLLM's start-up order."""
    by_phase = oracles.processing_cache_by_phase(vc, row)
    return {f"startup.{p}.{c}": n for p, rec in by_phase.items() for c, n in rec.items()}


def _mc(s: Setting) -> ModelConfig:
    px: dict[str, Any] = {"max_pixels": s["max_pixels"]} if s.get("max_pixels") else {}
    return ModelConfig(s["model"], max_model_len=s["max_model_len"], device="cpu", scale="small",
                       limit_mm_per_prompt=dict(s["limits"]), mm_processor_kwargs=px,
                       disable_mm_preprocessor_cache=bool(s.get("disable_mm_preprocessor_cache")))


def _sc(s: Setting) -> SchedulerConfig:
    return SchedulerConfig(max_num_batched_tokens=s["max_num_batched_tokens"], max_num_seqs=s["max_num_seqs"])


def _release(row: str) -> tuple[int, ...]:
    return tuple(int(x) for x in row.split("."))


def startup_row(row: str) -> str:
    """The start-up row a release runs: the newest release row at or before it (0.14.0 -> 0.13.0)."""
    older = [r for r in RELEASE_ROWS if _release(r) <= _release(row)]
    return max(older, key=_release) if older else row


@lru_cache(maxsize=4096)
def _expected(setting_key: str, row: str) -> dict[str, Any]:
    import json
    s = json.loads(setting_key)
    if s["model"] == WHISPER:
        return _expected_whisper(s, row)
    v = startup_row(row)
    mc, sc = _mc(s), _sc(s)
    per_item = oracles.max_tokens_per_item(mc, v)
    out: dict[str, Any] = {"max_tokens_per_item": per_item,
                           "encoder_budget": list(oracles.encoder_budget(VllmConfig(mc, sc), v))}
    if _release(v) >= (0, 10, 1):  # MultiModalBudget
        budget = min(compute_mm_encoder_budget(sc, per_item)) if per_item else 0
        out["mm_budget.encoder_budget"] = out["encoder_budget"]
        out["mm_budget.max_items_per_batch"] = {
            m: max_items_per_batch("floor", budget, n, sc.max_num_seqs, mc.get_mm_limit(m), mc.max_model_len)
            for m, n in per_item.items()}
    if s.get("lookup_only"):
        return out
    dummy = wc.profile_dummy(mc, sc, v)
    if dummy is None:
        return out
    raw = oracles.dummy_input_specs(mc, v, seq_len=dummy.seq_len, mm_counts={dummy.modality: 1})[dummy.modality][-1]
    out.update({"profile.modality": dummy.modality, "profile.items": dummy.items, "profile.seq_len": dummy.seq_len,
                "profile.tokens": dummy.tokens, "profile.raw_shape": list(raw.shape), "profile.raw_dtype": raw.dtype})
    passes = oracles.hf_passes_by_phase(VllmConfig(mc, sc), v)
    out["hf_passes"] = {p: passes[p] for p in ("runner_init", "scheduler_init", "profile_run")}
    out.update(_startup(VllmConfig(mc, sc), v))
    return out


def _expected_whisper(s: Setting, row: str) -> dict[str, Any]:
    if row not in ENCODER_LEN_VARIANTS:  # no encoder-length row (Whisper runs on V1 from 0.10.2)
        return {}
    mc = ModelConfig(WHISPER, device="cpu", scale="small")
    vc = VllmConfig(mc, _sc(s), CacheConfig(block_size=s["block_size"]), encoder_len_variant=row)
    return {"encdec_max_encoder_len": mc.max_encoder_len,
            "max_num_encoder_input_tokens": vc.scheduler_config.max_num_encoder_input_tokens,
            "cross_attention_blocks": cross_attention_sizing(vc).kv_check_blocks}  # CrossAttentionSpec's sizing


def expected(s: Setting, row: str) -> dict[str, Any]:
    """What the oracles say row ``row`` answers for setting ``s`` (the fields ``flatten`` makes)."""
    import json
    return _expected(json.dumps(s, sort_keys=True), row)


@dataclass(frozen=True)
class Known:
    """A difference between vLLM and the kit that is understood: ``applies`` to (setting, field,
    vLLM's value, the oracle's, row); ``reason`` says why, and whether it is being fixed."""
    name: str
    reason: str
    applies: Callable[[Setting, str, Any, Any, str], bool]


def _transposed(s, f, got, want, row) -> bool:
    return f == "profile.raw_shape" and len(got) == 4 and [got[0], got[2], got[1], got[3]] == want


VIDEO_FLOAT_BYTES = 20  # sys.getsizeof(0.5) - the 4 bytes of a float32 scalar tensor
FLOAT_FIELD_ROWS = ("0.9.0",)  # where the probe saw it (0.8.5 caches nothing during start-up)


def _video_float(s, f, got, want, row) -> bool:
    if not (f.startswith("startup.") and f.endswith(".cache_bytes") and isinstance(got, int)
            and isinstance(want, int) and row in FLOAT_FIELD_ROWS):
        return False
    held = expected(s, row).get(f.removesuffix("cache_bytes") + "cache_entries_by_modality", {})
    return held.get("video", 0) > 0 and got - want == VIDEO_FLOAT_BYTES * held["video"]


KNOWN: tuple[Known, ...] = (
    Known("video axis order", "vLLM's dummy video is np.full((T, W, H, 3)): width and height swapped "
          "against the (T, H, W, 3) of a decoded video; the kit builds (T, H, W, 3) (documented at "
          "BaseDummyInputsBuilder._get_dummy_videos); equal for square frames", _transposed),
    Known("video cache bytes", f"vLLM 0.9.0's ProcessingCache sizes a cached video item {VIDEO_FLOAT_BYTES} bytes "
          "larger than the kit: its second_per_grid_ts is a Python float (sys.getsizeof: 24 bytes) where the "
          "kit counts a float32 tensor (4 bytes); exactly 20 bytes per video item held, equal for images",
          _video_float),
)


@dataclass
class Diff:
    setting: str
    field: str
    got: Any
    want: Any
    known: Optional[str] = None  # the Known rule's name


def compare(lines: list[dict], row: str, known: tuple[Known, ...] = KNOWN) -> tuple[dict[str, list[int]], list[Diff]]:
    """Every probe line against row ``row``: ({field: [equal, compared]}, differences); a field the
    probe could not answer is a difference (never known)."""
    tally: dict[str, list[int]] = {}
    diffs: list[Diff] = []
    for line in lines:
        if line.get("kind") not in ("qwen", "whisper"):
            continue
        s = line["setting"]
        got, want = flatten(line), expected(s, row)
        if not want:  # Whisper under a release without an encoder-length row (before 0.10.2)
            continue
        if "startup" not in line:  # recorded before the probe read the start-up phases (issue 45)
            want = {k: v for k, v in want.items() if not k.startswith("startup.")}
        for f in sorted(set(want) | {k for k, v in got.items() if isinstance(v, dict) and NOT_PROBED in v}):
            t = tally.setdefault(f, [0, 0])
            t[1] += 1
            g, w = got.get(f, {NOT_PROBED: "the probe did not record it"}), want.get(f)
            if g == w:
                t[0] += 1
                continue
            rule = None if (isinstance(g, dict) and NOT_PROBED in g) or w is None else \
                next((k for k in known if k.applies(s, f, g, w, row)), None)
            diffs.append(Diff(s["id"], f, g, w, rule.name if rule else None))
    return tally, diffs


def failures(diffs: list[Diff]) -> list[Diff]:
    return [d for d in diffs if d.known is None]


def unprobed(lines: list[dict]) -> dict[str, int]:
    """{why: settings} for the settings where the probe answered no field at all (set-up failed)."""
    out: dict[str, int] = {}
    for line in lines:
        if line.get("kind") not in ("qwen", "whisper"):
            continue
        got = flatten(line)
        whys = [v[NOT_PROBED] for v in got.values() if isinstance(v, dict) and NOT_PROBED in v]
        if len(whys) == len(got):
            why = whys[0] if whys else "no field recorded"
            out[why] = out.get(why, 0) + 1
    return out


def probed_settings(lines: list[dict]) -> int:
    """Settings where the probe answered at least one field."""
    settings = sum(line.get("kind") in ("qwen", "whisper") for line in lines)
    return settings - sum(unprobed(lines).values())


def nearest(lines: list[dict], rows: tuple[str, ...] = RELEASE_ROWS) -> list[tuple[str, int, int]]:
    """(row, settings with an unexplained difference, settings with any difference) per release
    row, nearest first (ties: the newer row first); empty when no setting could be probed (every
    row would tie: none is nearer)."""
    if probed_settings(lines) == 0:
        return []
    out = []
    for row in rows:
        _, diffs = compare(lines, row)
        out.append((row, len({d.setting for d in failures(diffs)}), len({d.setting for d in diffs})))
    return sorted(out, key=lambda r: (r[1], r[2], tuple(-x for x in _release(r[0]))))


def release_rows() -> tuple[str, ...]:
    """The start-up release rows and the encoder-length release rows after them (0.14.0)."""
    extra = [r for r, v in ENCODER_LEN_VARIANTS.items() if v.release and r not in STARTUP_VARIANTS]
    return tuple(sorted({*RELEASE_ROWS, *extra}, key=_release))
