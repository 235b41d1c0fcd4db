"""Where a start-up run sits against the finding of PR #17935 (0.9.0 slower than 0.8.5): the cost
model's predicted 0.9.0 / 0.8.5 at a size, the QUICK report's size and rows, and the regime sentence
notebook 01 and the quick report print beside a measured ratio."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional

from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import parse_limits
from refimpl.lab.studies import REFERENCE, RESULTS_DIR
from refimpl.lab.studies import startup_tables as T
from refimpl.lab.studies.startup_tables import AFTER, BEFORE
from refimpl.variants import STARTUP_VARIANTS

# QUICK: no image (whose HF cost does not shrink with max_model_len) and the smallest max_model_len of
# QUICK_SIZES at which the cost model predicts 0.9.0 / 0.8.5 of at least QUICK_MIN_RATIO: there the full
# run's finding (0.9.0 slower) holds, at a cost of minutes (at 8192 tokens it does not: 0.9.0 runs 1 HF
# pass against 4 and its int64 dummy video is small).
QUICK_SIZES = (8192, 16384, 32768, 65536)
QUICK_MIN_RATIO = 1.1
QUICK_LIMITS = ("image=0",)
CROSSOVER_SIZES = (4096, 8192, 12288, 16384, 24576, 32768, 49152, 65536, 98304, 128000)
QUICK_REPEATS = 2

@lru_cache(maxsize=None)
def predicted_ratio(model: str, max_model_len: Optional[int], limits: tuple[str, ...] = (),
                    mm_processor_kwargs: tuple[tuple[str, Any], ...] = (), model_path: Optional[str] = None) -> float:
    """The cost model's 0.9.0 / 0.8.5 start-up seconds at this setting (``mm_processor_kwargs`` as
    sorted pairs, e.g. (("max_pixels", 1003520),)), priced with the reference machine's calibration
    (a prediction: ratios travel between machines better than seconds): refimpl.lab.explore.prediction's
    ``predicted_ratio``, the explorer's and the cost check's function."""
    from refimpl.lab.explore import prediction
    from refimpl.lab.explore.cost_model import Calibration
    cal = Calibration.load(RESULTS_DIR / REFERENCE / "calibration.json")
    vc = prediction.setting_config(model, max_model_len=max_model_len, limit_mm_per_prompt=parse_limits(list(limits)),
                                   mm_processor_kwargs=dict(mm_processor_kwargs), model_path=model_path)
    return prediction.predicted_ratio(vc, cal, AFTER, BEFORE)


def quick_size(model: str = "qwen2.5-vl-3b", limits: tuple[str, ...] = QUICK_LIMITS) -> int:
    """The smallest of QUICK_SIZES where ``predicted_ratio`` reaches QUICK_MIN_RATIO (else the largest)."""
    return next((n for n in QUICK_SIZES if predicted_ratio(model, n, limits) >= QUICK_MIN_RATIO), QUICK_SIZES[-1])


def regime(res: Result, hardware: str = REFERENCE) -> dict:
    """Where ``res`` was measured against the finding: its size, the predicted 0.9.0 / 0.8.5 there, the
    predicted crossover (the two CROSSOVER_SIZES around the first prediction above 1), the measured ratio
    and the committed full run's (``startup_<model>.json`` of ``hardware``)."""
    x: dict = next((r["runs"][0] for r in res.variants.values() if r["runs"]), {})  # as ``size`` reads them
    model, mml = res.params["model"], x.get("max_model_len", res.params.get("max_model_len"))
    lim = x.get("limit_mm_per_prompt", res.params.get("limit_mm_per_prompt")) or {}
    limits = tuple(f"{k}={n}" for k, n in lim.items())
    # the full setting, pixels and a local directory included (before issue 43 the sentence left them out)
    setting = dict(mm_processor_kwargs=tuple(sorted((res.params.get("mm_processor_kwargs") or {}).items())),
                   model_path=res.params.get("model_path"))
    above = [n for n in CROSSOVER_SIZES if predicted_ratio(model, n, limits, **setting) > 1]
    full = Result.load(RESULTS_DIR / hardware / f"startup_{model}.json")
    return {"size": size(res), "predicted": predicted_ratio(model, mml, limits, **setting),
            "crossover": (CROSSOVER_SIZES[CROSSOVER_SIZES.index(above[0]) - 1], above[0]) if above and
            above[0] != CROSSOVER_SIZES[0] else None,
            "measured": T.ratios(res).get(f"{AFTER} / {BEFORE}"), "ratio_of": T.time_key(res),
            "full": T.ratios(full).get(f"{AFTER} / {BEFORE}"), "full_size": size(full), "full_ratio_of": T.time_key(full),
            "full_file": f"results/{hardware}/startup_{model}.json"}


def _ci(c: dict) -> str:
    return f"{c['estimate']:.2f}" + (f" [{c['low']:.2f}, {c['high']:.2f}]" if c.get("low") is not None else "")


def regime_sentence(res: Result, hardware: str = REFERENCE) -> str:
    """The regime of ``res`` in words: whether the finding holds at its size (predicted), the measured
    ratio, and the committed full run's beside it; '' where the reference machine's calibration or full
    run is not at hand (an installed wheel ships no results/)."""
    if not all((RESULTS_DIR / h / f).exists() for h, f in (
            (REFERENCE, "calibration.json"), (hardware, f"startup_{res.params['model']}.json"))):
        return ""
    r = regime(res, hardware)
    where = ("above 1: the regime of the full run's finding" if r["predicted"] > 1 else
             "below 1: at this size 0.9.0's single HF pass saves more than its hashing costs, the opposite "
             "regime to the full run")
    out = f"Measured at {r['size']}, where the cost model predicts {AFTER} / {BEFORE} = {r['predicted']:.2f} ({where})"
    if r["crossover"]:
        out += (f"; it predicts the ratio crosses 1 between {r['crossover'][0]} and {r['crossover'][1]} tokens "
                "with these limits")
    if (m := r["measured"]) and m.get("estimate") is not None:
        out += f". Measured here: {_ci(m)} ({T.TIME_LABEL[r['ratio_of']]})"
    if (f := r["full"]) and f.get("estimate") is not None:
        out += f". The committed full run ({r['full_size']}, `{r['full_file']}`): {_ci(f)} ({T.TIME_LABEL[r['full_ratio_of']]})"
    return out + "."


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
