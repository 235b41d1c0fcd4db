"""The start-up cost model's prices: predicted seconds and peak resident bytes per part, per
start-up row, from the engine's StartupPlan (refimpl/engine/startup_plan.py) and the rates of
``refimpl bench calibrate`` (docs/cost-model.md). It only prices: what start-up does, and the
peak's holders (engine/startup_memory.py), are the plan's. ``predict(plan, calibration)``:

    seconds  = fixed (runner, load_model, text dummy run, encoder, KV) + sum over steps of
               dummy bytes x fill s/GiB[dtype] + hashed bytes x hash s/GiB[byte path, kind]
               + HF (text-only calls x s + image MP x s/MP + video input and padded output
               frame-MP x s/MP[dtype] + audio items x s) + split bytes x copy s/GiB
               + the processor's first build (the first pass that needs it) + reset bytes x free s/GiB
               (fill, hash and copy rates by the item's size: Calibration.sized); the encoder per
               frame pair, c + a t + b t^2 in the pair's tokens t (fits.pair_price)
    peak RSS = the plan's peak_bytes_by_holder with the calibration's MemoryRates

Every predicted number is labelled ``calibration.label``; refimpl/lab/explore/cost_check.py puts
them beside the committed Results. Left out: transparent huge pages, the two-process transport,
GPU phases.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from refimpl.engine.startup_memory import MemoryRates, peak_bytes_by_holder
from refimpl.engine.startup_plan import PHASES, RESET_PHASE, Item, StartupPlan, Step
from refimpl.lab.bench.calibrate import memory_rates
from refimpl.lab.bench.fits import pair_price
from refimpl.lab.bench.rates import Rates, SizedRate, need
from refimpl.lab.bench.schema import Result
from refimpl.lab.env import REPO_ROOT, hardware_folder, reporting_off, this_machine

__all__ = ["PARTS", "FIXED", "Calibration", "Prediction", "predict", "step_seconds"]
GiB = 1 << 30
PARTS = ("dummy_s", "hash_s", "hf_processor_s", "hf_text_only_s", "split_s")  # the benches' parts
FIXED = ("processor_build_s", "model_s", "encoder_s", "reset_s", "import_s")  # the rest of the seconds


@dataclass(frozen=True)
class Calibration:
    """The rates of one ``refimpl bench calibrate`` Result (medians over its runs, a drawn rate's over
    its draws): ``rates`` a typed ``Rates`` record (a dict of the stored dotted keys is converted);
    the condition it was measured under: ``reporting`` (the VM's free page reporting: True on, False
    off, None not recorded), ``load_avg`` (the 1-minute load average at its start, None before issue 43);
    ``check``: the committed same-day check that validated it ("" none: refimpl/lab/explore/calibrations.py);
    ``spread``: min and max of each rate drawn more than once, by stored key."""
    rates: Rates
    hardware: str  # its results/ folder
    date: str
    path: Optional[str] = None
    host: str = ""  # a condition of the host the rates were measured under ("free page reporting off")
    reporting: Optional[bool] = None
    load_avg: Optional[float] = None
    check: str = ""
    spread: dict[str, tuple[float, float]] = field(default_factory=dict)
    time: str = ""  # HH:MM UTC, where the Result records it

    def __post_init__(self) -> None:
        if isinstance(self.rates, dict):
            object.__setattr__(self, "rates", Rates.from_flat(self.rates))

    @property
    def label(self) -> str:
        return f"predicted (cost model, calibration of {self.hardware}, {self.date}{', ' + self.host if self.host else ''})"

    @property
    def condition(self) -> str:
        """The machine and its condition: hardware folder, load average, free page reporting."""
        load = "load not recorded" if self.load_avg is None else f"load {self.load_avg:.1f}"
        rep = {True: "free page reporting on", False: "free page reporting off", None: "page reporting not recorded"}
        return f"{self.hardware}, {load}, {rep[self.reporting]}"

    @property
    def described(self) -> str:
        """What the explorer shows: the label, the date and time, the condition and the check behind it."""
        when = f"{self.date} {self.time} UTC".replace("  ", " ") if self.time else self.date
        check = f"validated by the committed same-day check {self.check}" if self.check else \
            "no committed same-day check validated it"
        return f"{self.label}: measured {when} on {self.condition}; {check}"

    @property
    def flat(self) -> dict[str, float]:
        """The rates as the Result stores them (dotted keys)."""
        return self.rates.to_flat()

    @classmethod
    def from_result(cls, res: Result, path: Optional[str] = None, check: str = "") -> "Calibration":
        summary = res.variants["rates"]["summary"]
        rates = {k: v["median"] for k, v in summary.items()}  # as calibrate.load_rates
        settings = res.env["hardware"].get("page_reporting")
        off = reporting_off(settings)
        loads = [x["load_avg"] for x in res.variants["rates"]["runs"] if isinstance(x.get("load_avg"), (int, float))]
        spread = {k: (v["min"], v["max"]) for k, v in summary.items() if v.get("n", 1) > 1 and "min" in v}
        date = str(res.env.get("date", ""))
        return cls(Rates.from_flat(rates), hardware_folder(res.env["hardware"]), date[:10] or "undated", path,
                   "free page reporting off" if off else "", None if settings is None else not off,
                   max(loads) if loads else None, check, spread, date[11:16])

    @classmethod
    def load(cls, path: str | Path) -> "Calibration":
        return cls.from_result(Result.load(path), str(path))

    @classmethod
    def for_this_machine(cls, results_dir: Path = REPO_ROOT / "results") -> Optional["Calibration"]:
        """results/<this machine's folder>/calibration.json, or None ("no calibration for this machine")."""
        p = Path(results_dir) / hardware_folder(this_machine()) / "calibration.json"
        return cls.load(p) if p.exists() else None

    def __getitem__(self, key: str) -> float:
        """Deprecated (until 0.3.0): the rate of a stored dotted key; read ``rates`` instead."""
        warnings.warn("Calibration[key] is deprecated and goes in 0.3.0: read Calibration.rates (a Rates record)",
                      DeprecationWarning, stacklevel=2)
        flat = self.flat
        if key not in flat:
            raise KeyError(f"calibration of {self.hardware} has no rate {key!r}: rerun refimpl bench calibrate")
        return flat[key]

    def model_rate(self, model: str, key: str, fallback: Optional[str] = None) -> float:
        """Deprecated (until 0.3.0): the rate ``key`` of ``model`` (``rates.model(model, field)``)."""
        warnings.warn("Calibration.model_rate is deprecated and goes in 0.3.0: use Calibration.rates.model",
                      DeprecationWarning, stacklevel=2)
        name = {"rss": "weights_rss"}.get(key, key.replace(".", "_"))
        return self.rates.model(model, name, self.flat.get(fallback) if fallback else None)

    def memory_rates(self, model: str) -> MemoryRates:
        """The plan's MemoryRates for ``model`` from this calibration."""
        return memory_rates(self.rates, model)


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


def _hf_item_s(i: Item, r: Rates, model: str) -> float:
    if i.modality == "image":
        return r.hf_image_s(i.in_mp)
    if i.modality == "video":
        return r.hf_video_s(i.dtype, i.shape[0], i.in_mp, i.out_mp)
    return r.model(model, "hf_audio_s_per_item")


def step_seconds(s: Step, plan: StartupPlan, cal: Calibration) -> dict[str, float]:
    """The benches' parts (PARTS) of one step, in seconds."""
    r, out = cal.rates, dict.fromkeys(PARTS, 0.0)

    def gib_s(table: dict[str, SizedRate], key: str, what: str, nbytes: int) -> float:
        return nbytes / GiB * r.sized(need(table, key, what), nbytes)
    if s.built == "processed":
        out["dummy_s"] = sum(gib_s(r.fill_s_per_gib, "float32", "fill_s_per_gib", i.processed_bytes) for i in s.items)
    elif s.built == "raw":  # one array per distinct item: the builders repeat the same object
        fill = {i.spec: gib_s(r.fill_s_per_gib, "pil" if i.modality == "image" else i.dtype, "fill_s_per_gib", i.nbytes)
                for i in s.items if i.modality != "audio"}  # np.zeros of audio: pages touched later
        out["dummy_s"] = sum(fill.values())
    path = plan.variant.mm.hash_byte_path
    out["hash_s"] = sum(gib_s(r.hash_s_per_gib, f"{path}.{i.kind}", "hash_s_per_gib", i.nbytes)
                        for i in s.items) if s.hashed else 0.0
    text = r.model(plan.model, "hf_text_only_s", r.hf_text_only_s)  # Whisper's own, Qwen's the calibration's
    out["hf_text_only_s"] = s.text_only_calls * text
    out["hf_processor_s"] = out["hf_text_only_s"] + (
        text + sum(_hf_item_s(i, r, plan.model) for i in s.hf_items) if s.hf_items else 0.0)
    split = [i for i in s.hf_items if sum(j.modality == i.modality for j in s.hf_items) > 1]
    out["split_s"] = sum(i.processed_bytes / GiB * r.sized(r.copy_s_per_gib, i.processed_bytes) for i in split)
    return out


def _encoder_s(plan: StartupPlan, cal: Calibration) -> float:
    i, n, r, m = plan.profile_item, plan.encoder_items, cal.rates, plan.model
    if i is None:
        return 0.0
    if i.modality == "audio":
        return n * r.model(m, "encoder_s_per_item")
    copy = i.processed_bytes / GiB * r.sized(r.copy_s_per_gib, i.processed_bytes)  # torch.cat of the batch
    a, b = r.model_or_none(m, "encoder_pair_s_per_token"), r.model_or_none(m, "encoder_pair_s_per_token2")
    if a is None or b is None:  # a calibration before the per-pair rates: the power law over the whole item
        at, p = r.model(m, "encoder_tokens"), r.model(m, "encoder_exponent")
        return n * (r.model(m, "encoder_s_at_tokens") * (i.tokens / at) ** p + copy)
    pairs = i.frame_pairs  # per frame pair: c + a t + b t^2 in its tokens t (c: 0 before issue 43)
    c = r.model_or_none(m, "encoder_pair_s") or 0.0
    return n * (pairs * pair_price(c, a, b, i.tokens / pairs) + copy)


def predict(plan: StartupPlan, cal: Calibration) -> Prediction:
    """Price ``plan`` with ``cal``'s rates (see the module docstring and docs/cost-model.md)."""
    v, m, budget, r = plan.variant, plan.model, plan.calls is not None, cal.rates
    seconds = dict.fromkeys(PARTS + FIXED, 0.0)
    build = r.model(m, "processor_build_s")
    first_in_dummy = bool(plan.steps) and not v.uses_formula(m)  # else the formula's lookup builds it
    seconds["processor_build_s"] = 0.0 if first_in_dummy else build
    if budget:
        seconds["import_s"] = r.model(m, "import_s")
        phases = {f"call_{k + 1}": 0.0 for k in range(plan.calls or 0)}
        phases["call_1"] = seconds["import_s"] + seconds["processor_build_s"]
    else:
        seconds["encoder_s"] = _encoder_s(plan, cal)
        kv = plan.kv_bytes / GiB * r.model(m, "kv_s_per_gib")
        if plan.kv_registry_calls:
            kv += plan.kv_registry_calls * r.model(m, "registry_call_s")
        phases = dict(zip(PHASES, (r.model(m, "runner_s") + seconds["processor_build_s"],
                                   r.model(m, "load_s"), r.model(m, "dummy_run_s") + seconds["encoder_s"],
                                   kv, 0.0, 0.0)))
        seconds["model_s"] = sum(phases.values()) - seconds["encoder_s"] - seconds["processor_build_s"]
    step_parts = []
    for k, s in enumerate(plan.steps):
        parts = step_seconds(s, plan, cal)
        if k == 0 and first_in_dummy:
            parts["dummy_s"] += build
        step_parts.append(parts)
        for p in PARTS:
            seconds[p] += parts[p]
        phases[s.phase] = phases.get(s.phase, 0.0) + sum(parts[p] for p in PARTS if p != "hf_text_only_s")
    if not budget and v.reset_at_end:
        phases[RESET_PHASE] = seconds["reset_s"] = plan.cache_bytes_before_reset / GiB * r.free_s_per_gib
    peak_at, held = peak_bytes_by_holder(plan, cal.memory_rates(m))
    return Prediction(cal.label, seconds, phases, held, peak_at, plan.failure, step_parts)
