"""The start-up cost model's prices: predicted seconds and peak resident bytes per part, per
start-up row, from a plan (refimpl/lab/explore/cost_plan.py) and the rates of ``refimpl bench
calibrate`` (docs/cost-model.md). ``predict(plan, calibration)``:

    seconds  = fixed (runner, load_model, text dummy run, encoder, KV) + sum over steps of
               dummy bytes x fill s/GiB[dtype] + hashed bytes x hash s/GiB[byte path, kind]
               + HF (text-only calls x s + image MP x s/MP + video input and padded output
               frame-MP x s/MP[dtype] + audio items x s) + split bytes x copy s/GiB
               + the processor's first build (the first pass that needs it) + reset bytes x free s/GiB
    peak RSS = base (imports, weights) + max over steps of (cache held + KV held + dummy arrays
               + max(hash copies, HF working set)) or of the encoder's batch and working set

Every predicted number is labelled ``calibration.label``; refimpl/lab/explore/cost_check.py puts
them beside the committed Results. Left out: transparent huge pages, the two-process transport,
GPU phases.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from refimpl.config import SUPPORTED_MODELS
from refimpl.lab.bench.calibrate import hardware_folder, this_machine
from refimpl.lab.bench.schema import Result
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore.cost_plan import REGISTRY, Item, Plan, Step, budget_plan, startup_plan

__all__ = ["PARTS", "FIXED", "REGISTRY", "Calibration", "Item", "Plan", "Prediction", "Step", "budget_plan",
           "predict", "startup_plan", "step_seconds"]
GiB = 1 << 30
PARTS = ("dummy_s", "hash_s", "hf_processor_s", "hf_text_only_s", "split_s")  # the benches' parts
FIXED = ("processor_build_s", "model_s", "encoder_s", "reset_s", "import_s")  # the rest of the seconds


@dataclass(frozen=True)
class Calibration:
    """The rates of one ``refimpl bench calibrate`` Result (medians over its runs)."""
    rates: dict[str, float]
    hardware: str  # its results/ folder
    date: str
    path: Optional[str] = None

    @property
    def label(self) -> str:
        return f"predicted (cost model, calibration of {self.hardware}, {self.date})"

    @classmethod
    def from_result(cls, res: Result, path: Optional[str] = None) -> "Calibration":
        rates = {k: v["median"] for k, v in res.variants["rates"]["summary"].items()}
        return cls(rates, hardware_folder(res.env["hardware"]), str(res.env.get("date", ""))[:10] or "undated", path)

    @classmethod
    def load(cls, path: str | Path) -> "Calibration":
        return cls.from_result(Result.load(path), str(path))

    @classmethod
    def for_this_machine(cls, results_dir: Path = REPO_ROOT / "results") -> Optional["Calibration"]:
        """results/<this machine's folder>/calibration.json, or None ("no calibration for this machine")."""
        p = Path(results_dir) / hardware_folder(this_machine()) / "calibration.json"
        return cls.load(p) if p.exists() else None

    def __getitem__(self, key: str) -> float:
        if key not in self.rates:
            raise KeyError(f"calibration of {self.hardware} has no rate {key!r}: rerun refimpl bench calibrate")
        return self.rates[key]

    def model_rate(self, model: str, key: str, fallback: Optional[str] = None) -> float:
        """``model.<model>.<key>`` (``rss`` reads ``rss.model.<model>``, a key with a dot
        ``<key>.<model>``), else that of the calibrated model of its family (whisper-tiny for
        whisper-large-v3, both at the small scale), else ``fallback``."""
        def name_of(m: str) -> str:
            return f"rss.model.{m}" if key == "rss" else f"{key}.{m}" if "." in key else f"model.{m}.{key}"
        for m in (model, *(m for m in SUPPORTED_MODELS if m.split("-")[0] == model.split("-")[0])):
            if name_of(m) in self.rates:
                return self.rates[name_of(m)]
        return self[fallback or name_of(model)]


@dataclass
class Prediction:
    """Seconds per part and per phase (budget: per call), peak resident bytes by what holds them
    at the peak (``peak_at``: the step), all predicted; ``label`` says so."""
    label: str
    seconds: dict[str, float]
    phases: dict[str, float]
    peak_rss: dict[str, int]
    peak_at: str
    failure: Optional[str] = None
    step_parts: list[dict[str, float]] = field(default_factory=list)  # PARTS of each plan step

    @property
    def total_s(self) -> float:
        return sum(self.phases.values())

    @property
    def peak_rss_bytes(self) -> int:
        return sum(self.peak_rss.values())


def _hf_item_s(i: Item, cal: Calibration, model: str) -> float:
    if i.modality == "image":
        return i.in_mp * cal["hf.image_s_per_mp"]
    if i.modality == "video":
        return i.in_mp * cal[f"hf.video_in_s_per_mp.{i.dtype}"] + i.out_mp * cal[f"hf.video_out_s_per_mp.{i.dtype}"]
    return cal.model_rate(model, "hf.audio_s_per_item")


def _hf_working(i: Item, cal: Calibration) -> float:
    if i.modality == "image":
        return i.elements / 3 * cal["hf.image_peak_per_pixel"]
    if i.modality == "video":
        return i.elements * cal[f"hf.video_peak_per_element.{i.dtype}"]
    return i.nbytes + 2 * i.processed_bytes


def step_seconds(s: Step, plan: Plan, cal: Calibration) -> dict[str, float]:
    """The benches' parts (PARTS) of one step, in seconds."""
    out = dict.fromkeys(PARTS, 0.0)
    if s.built == "processed":
        out["dummy_s"] = sum(i.processed_bytes for i in s.items) / GiB * cal["fill_s_per_gib.float32"]
    elif s.built == "raw":  # one array per distinct item: the builders repeat the same object
        fill = {i.spec: i.nbytes / GiB * cal[f"fill_s_per_gib.{'pil' if i.modality == 'image' else i.dtype}"]
                for i in s.items if i.modality != "audio"}  # np.zeros of audio: pages touched later
        out["dummy_s"] = sum(fill.values())
    path = plan.variant.mm.hash_byte_path
    out["hash_s"] = sum(i.nbytes / GiB * cal[f"hash_s_per_gib.{path}.{i.kind}"] for i in s.items) if s.hashed else 0.0
    text = cal.model_rate(plan.model, "hf.text_only_s", "hf.text_only_s")  # Whisper's own, Qwen's has no suffix
    out["hf_text_only_s"] = s.text_only_calls * text
    out["hf_processor_s"] = out["hf_text_only_s"] + (
        text + sum(_hf_item_s(i, cal, plan.model) for i in s.hf_items) if s.hf_items else 0.0)
    split = [i for i in s.hf_items if sum(j.modality == i.modality for j in s.hf_items) > 1]
    out["split_s"] = sum(i.processed_bytes for i in split) / GiB * cal["copy_s_per_gib"]
    return out


def _encoder_s(plan: Plan, cal: Calibration) -> float:
    i, n = plan.profile_item, plan.encoder_items
    if i is None:
        return 0.0
    if i.modality == "audio":
        return n * cal.model_rate(plan.model, "encoder_s_per_item")
    at, p = cal.model_rate(plan.model, "encoder_tokens"), cal.model_rate(plan.model, "encoder_exponent")
    per_item = cal.model_rate(plan.model, "encoder_s_at_tokens") * (i.tokens / at) ** p
    return n * (per_item + i.processed_bytes / GiB * cal["copy_s_per_gib"])  # torch.cat of the batch


def _step_peak(s: Step, plan: Plan, cal: Calibration) -> dict[str, float]:
    """What a step holds beyond the base at its peak: hashing and the HF call run one after the other."""
    if s.built == "processed":
        return {"dummy arrays": sum(i.processed_bytes for i in s.items)}
    live = sum({i.spec: i.nbytes for i in s.items}.values())
    path = plan.variant.mm.hash_byte_path
    hashing = max((i.nbytes * cal[f"hash_peak.{path}.{i.kind}"] for i in s.items), default=0.0) if s.hashed else 0.0
    hf = sum(_hf_working(i, cal) for i in s.hf_items)
    return {"dummy arrays": live, "hash copies" if hashing > hf else "HF working set": max(hashing, hf)}


def _encoder_peak(plan: Plan, cal: Calibration) -> dict[str, float]:
    """The profile run's encoder: its input batch (torch.cat of the item) and activations, and the
    processed item itself when no cache kept it."""
    i, n = plan.profile_item, plan.encoder_items
    assert i is not None
    prof = [s for s in plan.steps if s.phase == "profile_run"]
    kept = bool(prof) and prof[-1].cache_on and prof[-1].cache_after >= i.processed_bytes
    act = n * (cal.model_rate(plan.model, "encoder_peak_per_item") if i.modality == "audio" else
               i.tokens * cal.model_rate(plan.model, "encoder_peak_per_token") + i.processed_bytes)
    return {"processing cache held": prof[-1].cache_after if prof else 0,
            "encoder batch and activations": act + (0 if kept else i.processed_bytes)}


def predict(plan: Plan, cal: Calibration) -> Prediction:
    """Price ``plan`` with ``cal``'s rates (see the module docstring and docs/cost-model.md)."""
    v, m, budget = plan.variant, plan.model, plan.calls is not None
    seconds = dict.fromkeys(PARTS + FIXED, 0.0)
    build = cal[f"first_use.processor_build_s.{m}"]
    first_in_dummy = bool(plan.steps) and not v.uses_formula(m)  # else the formula's lookup builds it
    seconds["processor_build_s"] = 0.0 if first_in_dummy else build
    base, weights = cal["rss.base"], cal.model_rate(m, "rss")
    if budget:
        seconds["import_s"] = cal[f"first_use.import_s.{m}"]
        phases = {f"call_{k + 1}": 0.0 for k in range(plan.calls or 0)}
        phases["call_1"] = seconds["import_s"] + seconds["processor_build_s"]
    else:
        seconds["encoder_s"] = _encoder_s(plan, cal)
        kv = plan.kv_bytes / GiB * cal.model_rate(m, "kv_s_per_gib")
        if plan.kv_registry_calls:
            kv += plan.kv_registry_calls * cal.model_rate(m, "registry_call_s")
        phases = {"runner_init": cal.model_rate(m, "runner_s") + seconds["processor_build_s"],
                  "load_model": cal.model_rate(m, "load_s"),
                  "profile_run": cal.model_rate(m, "dummy_run_s") + seconds["encoder_s"],
                  "kv_cache_init": kv, "capture_model": 0.0, "scheduler_init": 0.0}
        seconds["model_s"] = sum(phases.values()) - seconds["encoder_s"] - seconds["processor_build_s"]
    peaks: list[tuple[float, str, dict]] = []
    step_parts = []
    for k, s in enumerate(plan.steps):
        parts = step_seconds(s, plan, cal)
        if k == 0 and first_in_dummy:
            parts["dummy_s"] += build
        step_parts.append(parts)
        for p in PARTS:
            seconds[p] += parts[p]
        phases[s.phase] = phases.get(s.phase, 0.0) + sum(parts[p] for p in PARTS if p != "hf_text_only_s")
        loaded = not budget and s.phase != "runner_init"
        held = {"base (imports, weights)" if loaded else "base (imports)": base + (weights if loaded else 0),
                "KV cache": plan.kv_bytes * cal.model_rate(m, "kv_rss_per_byte") if s.phase == "scheduler_init" else 0,
                "processing cache held": s.cache_before, **_step_peak(s, plan, cal)}
        peaks.append((sum(held.values()), s.name, held))
    if not budget:
        w = {"base (imports, weights)": base + weights}
        if plan.profile_item is not None:
            peaks.append((0, "profile_run encoder", {**w, **_encoder_peak(plan, cal)}))
        prof = [s.cache_after for s in plan.steps if s.phase == "profile_run"]
        peaks.append((0, "profile_run text dummy run", {**w, "processing cache held": prof[-1] if prof else 0,
                                                         "text dummy run": cal.model_rate(m, "dummy_run_peak")}))
        peaks.append((0, "end of start-up", {**w, "KV cache": plan.kv_bytes * cal.model_rate(m, "kv_rss_per_byte"),
                                             "processing cache held": plan.cache_bytes_before_reset}))
        peaks = [(sum(h.values()), name, h) for _, name, h in peaks]
    if not budget and v.reset_at_end:
        phases["reset_mm_cache"] = seconds["reset_s"] = plan.cache_bytes_before_reset / GiB * cal["free_s_per_gib"]
    top = max(peaks, key=lambda x: x[0]) if peaks else (base, "start", {"base (imports)": base})
    return Prediction(cal.label, seconds, phases, {k: int(x) for k, x in top[2].items() if x}, top[1],
                      plan.failure, step_parts)
