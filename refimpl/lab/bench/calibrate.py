"""``refimpl bench calibrate``: the start-up cost model's rates on this machine, in 90 s or less (quiet).

Each run is a fresh process that first imports what a start-up worker imports, then measures on
arrays of ``size_mib`` and a few small HF-processor calls (rates in seconds per GiB or per
megapixel, memory in bytes per byte or element; stored as dotted keys, read as the typed record
refimpl/lab/bench/rates.py ``Rates``, whose ``from_flat`` / ``to_flat`` define every key):

  first_use.*         importing the processors' modules (the budget experiment pays it in its
                      first call) and building each model's HF processor (the first pass pays it)
  fill_s_per_gib.*    a dummy array of each dtype on fresh pages (np.full; torch.zeros for float32),
                      and ``pil`` for a white RGB PIL image
  hash_s_per_gib.<byte path>.<ndarray|image>, hash_peak.<...>: each byte path of
                      refimpl/multimodal/hasher.py (per byte of the raw item) and its extra peak
                      memory per byte
  hf.*                the Qwen2.5-VL HF processor: a text-only call (s), an image (s per
                      megapixel), a video of each dtype at 1, 2 and 4 frames (s per input and per
                      output (padded) frame-megapixel, least squares), their extra peak memory per
                      input and padded output element (least squares); the frames' sizes (MP);
                      Whisper's feature extractor on one 30 s clip per model (s)
  copy_s_per_gib, free_s_per_gib: torch clone (the per-item split) and freeing (the reset)
  large.*             the same fill (int64, uint8), copy and ndarray-hash rates once more on arrays
                      of ``large_mib`` (1 GiB; ``large.gib`` says which): start-up's items are
                      1-12 GiB and fresh pages cost more per byte there; the model interpolates
                      between the two sizes (Rates.sized); and the HF processor on the dummy's
                      full-size frame (``large.hf.*``: an image, a frame pair per dtype, s per MP)
  model.<m>.*         the first model of each family (qwen2.5, whisper): runner construction,
                      load_model, the text dummy run, the KV cache (s, bytes), the encoder (s and
                      bytes per token or per item; Qwen2.5-VL: frame pairs of 1024 and 4096 tokens in
                      batches of 4 and the 16384-token pair alone, each drawn 3 times, s = c + a t + b t^2 per pair, every coefficient >= 0:
                      fits.pair_price_fit); every Whisper model: one uncached
                      ``get_encdec_max_encoder_len`` call (s)
  rss.*               the process's resident bytes after the imports and each model's weights

The Result (bench "calibrate", one label ``rates``, a run per process, the medians in its
summary) goes to results/<hardware folder>/calibration.json by default (``default_out``).
The refimpl modules a start-up imports are imported inside the measuring functions, after
``calibrate_sections.first_use`` has timed their first import. No vLLM counterpart. Left out: GPU rates (the rates are the CPU's; the model's GPU phases are not
predicted), transparent huge pages on (the benches turn numpy's madvise off).
"""
from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from refimpl.lab.bench.common import set_single_thread
from refimpl.lab.bench.rates import VIDEO_DTYPES, GiB, Rates
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import CalibrateSpec
from refimpl.lab.env import REPO_ROOT, hardware_folder, result_env, this_machine  # the last two: moved to env
from refimpl.lab.stats import summarize
from refimpl.multimodal.hash_paths import BYTE_PATHS
from refimpl.utils.mem_utils import rss_bytes

if TYPE_CHECKING:  # the start-up plan's modules (transformers' image processing): not in calibrate's parent
    from refimpl.engine.startup_memory import MemoryRates

SPREAD_SHOWN = ("hash_s_per_gib.v0.9.0.ndarray", "large.hf.video_s_per_mp.int64", "model.qwen2.5-vl-3b.encoder_s_at_tokens")
WALL_GOAL_S = 90.0  # one run (the default), quiet: docs/cost-model.md "The rates"
__all__ = ["WALL_GOAL_S", "GiB", "VIDEO_DTYPES", "default_out", "memory_rates", "load_rates",
           "run_once", "result", "lines", "hardware_folder", "this_machine"]


def default_out() -> Path:
    """results/<this machine's folder>/calibration.json"""
    return REPO_ROOT / "results" / hardware_folder(this_machine()) / "calibration.json"


def memory_rates(rates: Rates, model: str) -> MemoryRates:
    """The StartupPlan's MemoryRates for ``model`` from a calibration's rates (the defaults where a
    calibration of other models has none: a Whisper-only one has no video rates)."""
    from refimpl.engine.startup_memory import MemoryRates
    def m(name: str) -> float:
        return rates.model(model, name)
    d, audio = MemoryRates(), model.startswith("whisper")
    hf = dict(d.hf_per_element) | dict(rates.hf_video_peak_per_element)
    if rates.hf_image_peak_per_pixel is not None:
        hf["pil"] = rates.hf_image_peak_per_pixel
    return MemoryRates(
        base=int(rates.rss_base), weights=int(m("weights_rss")), kv_per_byte=m("kv_rss_per_byte"),
        hf_per_element=tuple(hf.items()), hf_per_out_element=tuple(rates.hf_video_peak_per_out_element.items()),
        hash_peak=tuple((k, rates.hash_peak.get(k, x)) for k, x in d.hash_peak),
        encoder_per_token=0.0 if audio else m("encoder_peak_per_token"),
        encoder_tokens=0 if audio else int(m("encoder_tokens")),
        encoder_per_token_large=0.0 if audio else rates.model_or_none(model, "encoder_pair_peak_per_token") or 0.0,
        encoder_large_tokens=0 if audio else int(rates.model_or_none(model, "encoder_pair_peak_tokens") or 0),
        encoder_per_audio=m("encoder_peak_per_item") if audio else 0.0, dummy_run=int(m("dummy_run_peak")))


def load_rates(path: str | Path) -> Rates:
    """The medians of a calibration Result's rates, as the typed record."""
    return Rates.from_flat({k: v["median"] for k, v in Result.load(path).variants["rates"]["summary"].items()})


def run_once(spec: CalibrateSpec, label: str) -> dict:
    """One calibration in this process, the sections of ``calibrate_sections.plan(spec)``: ``{"rates":
    {key: value}, "draws": {key: [each draw]} of the dominant rates, "load_avg": the 1-minute load at its
    start, "sections_s": {section: wall seconds}, "seconds": its wall time}``."""
    t_start, load = time.perf_counter(), os.getloadavg()[0]  # the machine as the run found it (1-minute load)
    from refimpl.lab.bench import (
        calibrate_sections as sec,  # numpy, torch, PIL: the worker's, not the parent's
    )
    threads = set_single_thread()
    importlib.import_module("refimpl.lab.bench.startup").set_numpy_hugepage(False)
    r: dict[str, float] = {"rss.imports": rss_bytes()}
    draws: dict[str, list[float]] = {}  # the dominant rates, every draw (calibrate_sections.DRAWS)
    r["size_gib"] = (spec.size_mib << 20) / GiB
    sections = sec.run_plan(sec.plan(spec), r, draws)  # seconds by section
    Rates.from_flat(r)  # every key one the record knows (KeyError naming one it does not)
    return {"variant": label, "torch_num_threads": threads, "rates": r, "draws": draws, "load_avg": load,
            "sections_s": sections, "seconds": time.perf_counter() - t_start}


def result(spec: CalibrateSpec, trial, in_process: bool) -> Result:
    """The calibrate Result: each rate's summary over the runs; a drawn rate's (``run["draws"]``,
    calibrations since issue 43) over every draw of every run: its median with min, max and IQR.
    ``params["wall_s"]``: seconds from the first run's start to the last one's end, fresh processes'
    start-up included (the parent's own start-up before it, about 2 s, not)."""
    runs = trial.runs["rates"]
    keys = sorted(set.intersection(*(set(x["rates"]) for x in runs))) if runs else []

    def values(k: str) -> list[float]:
        if all(k in x.get("draws", {}) for x in runs):
            return [v for x in runs for v in x["draws"][k]]
        return [x["rates"][k] for x in runs]
    summary = {k: summarize(values(k)) for k in keys}
    params = {**spec.params(), **trial.stop, "wall_s": round(trial.timed_s, 1)}  # the goal: WALL_GOAL_S
    return Result(spec.bench, result_env(trial.runs, "cpu", in_process), params,
                  {"rates": {"runs": runs, "summary": summary}}, missing=[] if runs else ["runs"])


def lines(res: Result) -> list[str]:
    """The headline rates (medians over the runs) and each run's seconds."""
    flat = {k: v["median"] for k, v in res.variants["rates"]["summary"].items()}
    runs = res.runs("rates")
    wall = res.params.get("wall_s")
    out = [f"calibrate on {res.hardware_name}: {len(runs)} run(s) of "
           + ", ".join(f"{x['seconds']:.0f} s" for x in runs)
           + (f"; {wall:.0f} s in all (goal {WALL_GOAL_S:.0f} s on a quiet machine)" if wall is not None else "")]
    for x in runs[:1]:
        if x.get("sections_s"):
            out.append("sections s: " + ", ".join(f"{k} {v:.1f}" for k, v in x["sections_s"].items()))
    if not flat:
        return out
    r = Rates.from_flat(flat)
    out.append("hash s/GiB (ndarray): " + ", ".join(
        f"{p} {r.hash_s_per_gib[f'{p}.ndarray'].small:.2f}"
        + (f" ({r.hash_s_per_gib[f'{p}.ndarray'].large:.2f} at {r.large_gib:g} GiB)"
           if r.hash_s_per_gib[f'{p}.ndarray'].large is not None else "") for p in BYTE_PATHS))
    out.append("fill s/GiB: " + ", ".join(f"{d} {r.fill_s_per_gib[d].small:.2f}" for d in (*VIDEO_DTYPES, "float32")))
    if r.hf_image_s_per_mp is not None:
        out.append(f"HF: image {1e3 * r.hf_image_s_per_mp:.0f} ms/MP; video " + ", ".join(
            f"{d} {1e3 * r.hf_video_in_s_per_mp[d]:.0f} + {1e3 * r.hf_video_out_s_per_mp[d]:.0f} ms/MP"
            for d in VIDEO_DTYPES))
    summary = res.variants["rates"]["summary"]
    spread = [f"{k} {v['median']:.3g} [{v['min']:.3g}, {v['max']:.3g}] (n={v['n']})" for k, v in summary.items()
              if k in SPREAD_SHOWN and v.get("n", 1) > 1]
    if spread:
        out.append("drawn rates, median [min, max]: " + "; ".join(spread))
    calls = {m: x.registry_call_s for m, x in r.models.items() if x.registry_call_s is not None}
    if calls:
        out.append("registry call: " + ", ".join(f"{m} {1e3 * v:.1f} ms" for m, v in calls.items()))
    return out
