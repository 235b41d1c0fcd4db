"""Where a start-up run sits against the finding of PR #17935 (0.9.0 slower than 0.8.5): the cost
model's predicted 0.9.0 / 0.8.5 at a size (``predicted_ratio``, the one place the printed prediction
comes from), the QUICK report's setting (``quick_setting``: chosen from committed fresh-process runs,
not from the model) and rows, the regime sentence notebook 01 and the quick report print beside a
measured ratio, and ``reversal_line``, the quick report's first line when its run lands on the other
side of 1 from the committed full run."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import parse_limits
from refimpl.lab.studies import REFERENCE, RESULTS_DIR
from refimpl.lab.studies import startup_tables as T
from refimpl.lab.studies.startup_tables import AFTER, BEFORE
from refimpl.variants import STARTUP_VARIANTS

# QUICK: the smallest committed setting (max_model_len, limits, processor kwargs) of the reference
# machine where every committed fresh-process ladder with an interval puts 0.9.0 / 0.8.5 above
# QUICK_MIN_RATIO with its interval above 1 (``quick_setting``). The cost model alone chose 8192 tokens,
# image off, before (predicted 1.16) and the run measured 0.87 [0.84, 0.90]: it over-prices 0.9.0's hashing
# at small sizes. QUICK_SIZES / QUICK_LIMITS are the model's fallback where no results/ is at hand.
QUICK_SIZES = (8192, 16384, 32768, 65536)
QUICK_MIN_RATIO = 1.1
QUICK_LIMITS = ("image=0",)
CROSSOVER_SIZES = (4096, 8192, 12288, 16384, 24576, 32768, 49152, 65536, 98304, 128000)
QUICK_REPEATS = 2

@lru_cache(maxsize=None)
def predicted_ratio(model: str, max_model_len: Optional[int], limits: tuple[str, ...] = (),
                    mm_processor_kwargs: tuple[tuple[str, Any], ...] = (), model_path: Optional[str] = None) -> float:
    """The cost model's 0.9.0 / 0.8.5 start-up seconds at this setting (``mm_processor_kwargs`` as
    sorted pairs, e.g. (("max_pixels", 1003520),)), priced with the reference machine's default
    calibration, the explorer's (calibrations.default_calibration: the newest one a committed same-day check
    validated; a prediction: ratios travel between machines better than seconds): refimpl.lab.explore.prediction's
    ``predicted_ratio``, the explorer's and the cost check's function."""
    from refimpl.lab.explore import prediction
    from refimpl.lab.explore.calibrations import default_calibration
    cal, _ = default_calibration(REFERENCE, REFERENCE, RESULTS_DIR)
    if cal is None:
        raise FileNotFoundError(f"no calibration under {RESULTS_DIR / REFERENCE}")
    vc = prediction.setting_config(model, max_model_len=max_model_len, limit_mm_per_prompt=parse_limits(list(limits)),
                                   mm_processor_kwargs=dict(mm_processor_kwargs), model_path=model_path)
    return prediction.predicted_ratio(vc, cal, AFTER, BEFORE)


@dataclass(frozen=True)
class QuickSetting:
    """One committed start-up setting and its committed 0.9.0 / 0.8.5 ratios (``ratios``: one
    ``compare`` dict per ladder, ``sources``: their files under results/, in the same order)."""
    max_model_len: int
    limits: tuple[str, ...]
    mm_processor_kwargs: tuple[tuple[str, int], ...]
    ratios: tuple[dict, ...]
    sources: tuple[str, ...]

    @property
    def held(self) -> bool:
        """Every ladder with an interval above QUICK_MIN_RATIO and clear of 1 (at least one such ladder)."""
        ci = [c for c in self.ratios if c.get("low") is not None]
        return bool(ci) and all(c["estimate"] > QUICK_MIN_RATIO and c["low"] > 1 for c in ci)

    def describe(self) -> str:
        """'max_model_len 50000, 1 item per modality' (+ processor kwargs)."""
        return (f"max_model_len {self.max_model_len}, " + (", ".join(self.limits) or "1 item per modality")
                + "".join(f", {k} {v}" for k, v in self.mm_processor_kwargs))

    def committed(self) -> str:
        """The committed ratios in words: 'committed 1.20 [1.19, 1.20] ... (N fresh-process ladders: files)'."""
        return (f"committed {', '.join(_ci(c) for c in self.ratios if c.get('estimate') is not None)} "
                f"({len(self.ratios)} fresh-process ladder(s): {', '.join(f'`{s}`' for s in self.sources)})")


def committed_settings(model: str = "qwen2.5-vl-3b", hardware: str = REFERENCE) -> list[QuickSetting]:
    """Every committed fresh-process start-up setting of ``model`` on ``hardware`` (results/<hardware>/ and
    its dated folders) whose ladders ran both 0.8.5 and 0.9.0, smallest max_model_len first."""
    return list(_committed_settings(model, RESULTS_DIR / hardware))


@lru_cache(maxsize=None)
def _committed_settings(model: str, folder: Path) -> tuple[QuickSetting, ...]:
    by: dict[tuple, list[tuple[dict, str]]] = {}
    for p in sorted(folder.glob(f"**/startup_{model}*.json")):
        res = Result.load(p)
        if res.env.get("in_process") or res.params.get("process_mode", "inproc") != "inproc" or \
                not {AFTER, BEFORE} <= set(T.measured(res)):
            continue
        x = res.runs(BEFORE)[0]
        lim = x.get("limit_mm_per_prompt", res.params.get("limit_mm_per_prompt")) or {}
        if (mml := x.get("max_model_len") or res.params.get("max_model_len")) is None:
            continue
        key = (int(mml), tuple(f"{k}={n}" for k, n in sorted(lim.items())),
               tuple(sorted((res.params.get("mm_processor_kwargs") or {}).items())))
        by.setdefault(key, []).append((T.ratios(res).get(f"{AFTER} / {BEFORE}") or {},
                                       str(p.relative_to(folder.parent.parent))))
    return tuple(QuickSetting(k[0], k[1], k[2], tuple(c for c, _ in v), tuple(s for _, s in v))
                 for k, v in sorted(by.items()))


def quick_setting(model: str = "qwen2.5-vl-3b", hardware: str = REFERENCE) -> Optional[QuickSetting]:
    """The QUICK report's setting: the smallest committed one where ``QuickSetting.held`` (None where no
    committed run qualifies, e.g. an installed wheel without results/)."""
    return next((s for s in committed_settings(model, hardware) if s.held), None)


def quick_size(model: str = "qwen2.5-vl-3b", limits: tuple[str, ...] = QUICK_LIMITS) -> int:
    """The QUICK report's max_model_len: ``quick_setting``'s; without committed results the smallest of
    QUICK_SIZES where ``predicted_ratio`` (with ``limits``) reaches QUICK_MIN_RATIO (else the largest)."""
    if (s := quick_setting(model)) is not None:
        return s.max_model_len
    return next((n for n in QUICK_SIZES if predicted_ratio(model, n, limits) >= QUICK_MIN_RATIO), QUICK_SIZES[-1])


def regime(res: Result, hardware: str = REFERENCE) -> dict:
    """Where ``res`` was measured against the finding: its size, the predicted 0.9.0 / 0.8.5 there, the
    predicted crossover (the two CROSSOVER_SIZES around the first prediction above 1), the measured ratio,
    the committed ladders of the same setting (``committed``: setting, held, ratios, sources, text; or
    None) and the committed
    full run's (``startup_<model>.json`` of ``hardware``)."""
    x: dict = next((r["runs"][0] for r in res.variants.values() if r["runs"]), {})  # as ``size`` reads them
    model, mml = res.params["model"], x.get("max_model_len", res.params.get("max_model_len"))
    lim = x.get("limit_mm_per_prompt", res.params.get("limit_mm_per_prompt")) or {}
    limits = tuple(f"{k}={n}" for k, n in lim.items())
    # the full setting, pixels and a local directory included (before issue 43 the sentence left them out)
    setting = dict(mm_processor_kwargs=tuple(sorted((res.params.get("mm_processor_kwargs") or {}).items())),
                   model_path=res.params.get("model_path"))
    above = [n for n in CROSSOVER_SIZES if predicted_ratio(model, n, limits, **setting) > 1]
    full = Result.load(RESULTS_DIR / hardware / f"startup_{model}.json")
    key = (mml, tuple(sorted(limits)), tuple(sorted((res.params.get("mm_processor_kwargs") or {}).items())))
    return {"size": size(res), "predicted": predicted_ratio(model, mml, limits, **setting),
            "crossover": (CROSSOVER_SIZES[CROSSOVER_SIZES.index(above[0]) - 1], above[0]) if above and
            above[0] != CROSSOVER_SIZES[0] else None,
            "measured": T.ratios(res).get(f"{AFTER} / {BEFORE}"), "ratio_of": T.time_key(res),
            "committed": next(({"setting": c.describe(), "held": c.held, "ratios": list(c.ratios),
                                "sources": list(c.sources), "text": c.committed()}
                               for c in committed_settings(model, hardware)
                               if (c.max_model_len, c.limits, c.mm_processor_kwargs) == key), None),
            "full": T.ratios(full).get(f"{AFTER} / {BEFORE}"), "full_size": size(full), "full_ratio_of": T.time_key(full),
            "full_file": f"results/{hardware}/startup_{model}.json"}


def _ci(c: dict) -> str:
    return f"{c['estimate']:.2f}" + (f" [{c['low']:.2f}, {c['high']:.2f}]" if c.get("low") is not None else "")


def _side(c: Optional[dict]) -> int:
    """+1 / -1 where the interval of ``c`` lies wholly above / below 1, else 0."""
    if not c or c.get("low") is None:
        return 0
    return 1 if c["low"] > 1 else -1 if c["high"] < 1 else 0


def reversal_line(res: Result, hardware: str = REFERENCE) -> str:
    """One line when the interval of 0.9.0 / 0.8.5 measured in ``res`` lies on the other side of 1 from
    the committed full run's (both figures, both sizes); '' otherwise or without committed results."""
    if not (RESULTS_DIR / hardware / f"startup_{res.params['model']}.json").exists() or \
            not {AFTER, BEFORE} <= set(T.measured(res)):
        return ""
    r = regime(res, hardware)
    m, f = r["measured"], r["full"]
    if _side(m) == 0 or _side(f) == 0 or _side(m) == _side(f):
        return ""
    return (f"WARNING: this run REVERSES the finding: measured here {AFTER} / {BEFORE} = {_ci(m)} "
            f"({T.TIME_LABEL[r['ratio_of']]}, {r['size']}), against the committed full run's {_ci(f)} "
            f"({T.TIME_LABEL[r['full_ratio_of']]}, {r['full_size']}, `{r['full_file']}`); quote the full run.")


def regime_sentence(res: Result, hardware: str = REFERENCE) -> str:
    """The regime of ``res`` in words: ``reversal_line`` first where it applies, the ratio this run
    measured, the committed ladders of the same setting, the committed full run's, and the cost model's
    prediction (labelled as one); '' where the reference machine's calibration or full run is not at
    hand (an installed wheel ships no results/)."""
    if not all((RESULTS_DIR / h / f).exists() for h, f in (
            (REFERENCE, "calibration.json"), (hardware, f"startup_{res.params['model']}.json"))):
        return ""
    r = regime(res, hardware)
    out = f"Measured at {r['size']}"
    if (m := r["measured"]) and m.get("estimate") is not None:
        out += f"; {AFTER} / {BEFORE} measured here: {_ci(m)} ({T.TIME_LABEL[r['ratio_of']]})"
    if (c := r["committed"]) is not None:
        out += f". At this setting, {c['text']}"
    if (f := r["full"]) and f.get("estimate") is not None:
        out += f". The committed full run ({r['full_size']}, `{r['full_file']}`): {_ci(f)} ({T.TIME_LABEL[r['full_ratio_of']]})"
    out += (f". Predicted by the cost model (a prediction, not a measurement): {r['predicted']:.2f} at this size"
            + (f", crossing 1 between {r['crossover'][0]} and {r['crossover'][1]} tokens with these limits"
               if r["crossover"] else "") + ".")
    rev = reversal_line(res, hardware)
    return f"{rev}\n\n{out}" if rev else out


def quick_variants() -> tuple[str, ...]:
    """0.8.5, 0.9.0, the first copy-free hasher on the int64 video (0.9.0+#24925), shape-only."""
    vs = list(STARTUP_VARIANTS.values())
    stream = next(v.name for v in vs if v.cache_during_profiling and v.mm.hash_byte_path == "stream"
                  and v.mm.dummy_video_dtype == "int64" and not v.formula_models)
    return (BEFORE, AFTER, stream, next(v.name for v in vs if v.mm.shape_only))


def size(res: Result) -> str:
    """'max_model_len N, <limits>' of the runs of ``res``."""
    x: dict = next((r["runs"][0] for r in res.variants.values() if r["runs"]), {})
    lim = x.get("limit_mm_per_prompt", res.params.get("limit_mm_per_prompt")) or {}
    kw = res.params.get("mm_processor_kwargs") or {}
    return (f"max_model_len {x.get('max_model_len', res.params.get('max_model_len'))}, "
            + (", ".join(f"{k}={n}" for k, n in lim.items()) or "1 item per modality")
            + "".join(f", {k} {n}" for k, n in kw.items()))
