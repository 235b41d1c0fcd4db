"""The sections of one ``refimpl bench calibrate`` run (refimpl/lab/bench/calibrate.py says what each
rate is): each writes its rates into the run's flat dict ``r``. ``measure`` / ``median_of`` give
seconds and extra peak resident bytes of one call (calibrate_measure.py); the HF-processor sections
are in calibrate_hf.py. No vLLM counterpart."""
from __future__ import annotations

import gc
import importlib
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Callable, Optional

import numpy as np
import torch
from PIL import Image

from refimpl.lab.bench.calibrate_hf import hf_qwen, whisper
from refimpl.lab.bench.calibrate_measure import DRAWS, drawn, measure, median_of, settle
from refimpl.lab.bench.fits import median_draw, pair_price_fit
from refimpl.lab.bench.rates import VIDEO_DTYPES, GiB
from refimpl.lab.bench.specs import CalibrateSpec
from refimpl.multimodal.hasher import BYTE_PATHS, hash_kwargs_by
from refimpl.utils.mem_utils import rss_bytes

if TYPE_CHECKING:
    from refimpl.config import VllmConfig

# (frame side, frame pairs in the batch): 1024, 4096, 16384 tokens per pair. 4 pairs at 1024 and 4096 tokens:
# a pair there costs the same in a batch of 3-4 as in the 7 of the profile video from 0.11.0; the full-size
# frame's pair alone, as 0.8.5-0.10.2 encode it (0.11+ encode 3-7, each ~10% dearer in a batch: issue 43,
# `refimpl probe encoder-batch`, docs/cost-model.md "The encoder per frame pair")
ENCODER_PAIRS = ((896, 4), (1792, 4), (3584, 1))

__all__ = ["measure", "median_of", "first_use", "fills", "hashes", "copies", "large",
           "hf_qwen", "model", "whisper", "Section", "plan", "run_plan", "DRAWS", "drawn", "settle",
           "PATCH_DIM", "video_pairs", "runner_config"]

PATCH_DIM = 1176  # Qwen2.5-VL's flattened patch: 3 channels x 2 frames x 14 x 14


def video_pairs(side: int, pairs: int) -> dict[str, torch.Tensor]:
    """A video of ``pairs`` frame pairs of ``side`` x ``side`` pixels as the HF processor returns it:
    ``pixel_values_videos`` (pairs * (side/14)^2, 1176) float32, ``video_grid_thw`` (1, 3) int64."""
    g = side // 14
    return {"pixel_values_videos": torch.zeros(pairs * g * g, PATCH_DIM), "video_grid_thw": torch.tensor([[pairs, g, g]])}


def runner_config(model: str) -> VllmConfig:
    """The VllmConfig the calibration's (and the encoder-batch probe's) runner is built from: ``model`` at
    the small scale on the CPU, SchedulerConfig's and CacheConfig's defaults, a registry without a cache."""
    from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from refimpl.multimodal.registry import MultiModalRegistry
    return VllmConfig(ModelConfig(model, device="cpu"), SchedulerConfig(), CacheConfig(), mm_registry=MultiModalRegistry(0))


@dataclass(frozen=True)
class Section:
    """One section of a calibration run: ``fn(r, draws)`` writes its rates into ``r`` and the draws of
    its dominant rates into ``draws``."""
    name: str
    fn: Callable[[dict, dict], None]


def plan(spec: CalibrateSpec) -> list[Section]:
    """The sections of one calibration run of ``spec``, in order (``calibrate.run_once`` and
    scripts/calibrate_sections.py run this list): the first use (imports, HF processors; then the
    interpreter's objects frozen for the collector, see ``settle``), fills, hashes, copies, the large
    arrays, the Qwen2.5-VL HF processor, each family's first model, each Whisper model's calls."""
    size, models = spec.size_mib << 20, spec.models
    families = {m.split("-")[0]: m for m in reversed(models)}  # the first model of each family
    out = [Section("first use", partial(_first_use_section, models)),
           Section("fills", lambda r, d: fills(r, size)), Section("hashes", lambda r, d: hashes(r, size, d)),
           Section("copies", lambda r, d: copies(r, size))]
    if spec.large_mib:
        out.append(Section("large", lambda r, d: large(r, spec.large_mib << 20, d)))
    if "qwen2.5" in families:
        out.append(Section("HF processor", lambda r, d: hf_qwen(r, size, families["qwen2.5"], d)))
    out += [Section(f"model {m}", partial(_model_section, m)) for m in families.values()]
    out += [Section(f"whisper {m}", partial(_whisper_section, m)) for m in models if m.startswith("whisper")]
    return out


def _first_use_section(models: tuple[str, ...], r: dict, draws: dict) -> None:
    first_use(r, models)
    settle(r)


def _model_section(m: str, r: dict, draws: dict) -> None:
    model(r, m, draws)


def _whisper_section(m: str, r: dict, draws: dict) -> None:
    whisper(r, m)


def run_plan(sections: list[Section], r: dict, draws: dict) -> dict[str, float]:
    """Run ``sections`` in order: their wall seconds by name. The collector's freeze of ``settle`` is
    undone at the end (also on an error)."""
    seconds: dict[str, float] = {}
    try:
        for s in sections:
            t0 = time.perf_counter()
            s.fn(r, draws)
            seconds[s.name] = time.perf_counter() - t0
    finally:
        gc.unfreeze()
    return seconds


def first_use(r: dict, models: tuple[str, ...]) -> None:
    from refimpl.multimodal.registry import _factories
    for m in models:  # the module import (the budget experiment's first call), then the processor
        t0 = time.perf_counter()
        proc_cls = _factories(m)[2]  # the processor's module builds the HF processor (the info's is light)
        r[f"first_use.import_s.{m}"] = time.perf_counter() - t0
        mod = importlib.import_module(proc_cls.__module__)
        t0 = time.perf_counter()
        mod.build_hf_processor(m)
        r[f"first_use.processor_build_s.{m}"] = time.perf_counter() - t0


def fills(r: dict, size: int) -> None:
    for dt in VIDEO_DTYPES:
        shape = (size // (3 * np.dtype(dt).itemsize), 3)
        r[f"fill_s_per_gib.{dt}"] = median_of(partial(np.full, shape, 255, dtype=dt), n=2)[0] / (size / GiB)
    r["fill_s_per_gib.float32"] = median_of(lambda: torch.zeros(size // 4), n=2)[0] / (size / GiB)
    side = int((size / 3) ** 0.5)
    s, _ = median_of(lambda: Image.new("RGB", (side, side), (255, 255, 255)), n=2)
    r["fill_s_per_gib.pil"] = s / (side * side * 3 / GiB)


def hashes(r: dict, size: int, draws: Optional[dict] = None, n: int = DRAWS) -> None:
    """Each byte path's hash rate (s/GiB) on an int64 array of ``size`` and an RGB image a quarter of
    it, and its extra peak per byte; the rate drawn ``n`` times, the draws interleaved by path."""
    arr = np.full((size // 24, 3), 255, dtype=np.int64)
    side = int((size / 12) ** 0.5)  # images a quarter of the array: six copies under v0.9.0
    img = Image.new("RGB", (side, side), (255, 255, 255))
    times: dict[str, list[float]] = {}
    for _ in range(n):
        for path in BYTE_PATHS:
            for kind, item, nbytes in (("ndarray", arr, arr.nbytes), ("image", img, side * side * 3)):
                s, peak = measure(partial(hash_kwargs_by, path, model_id="m", item=item))
                times.setdefault(f"{path}.{kind}", []).append(s / (nbytes / GiB))
                r[f"hash_peak.{path}.{kind}"] = max(r.get(f"hash_peak.{path}.{kind}", 0.0), peak / nbytes)
    for key, values in times.items():
        drawn(r, draws, f"hash_s_per_gib.{key}", values)


def copies(r: dict, size: int) -> None:
    t = torch.zeros(size // 4)
    r["copy_s_per_gib"] = median_of(lambda: t.clone(), n=2)[0] / (size / GiB)
    held: list = []
    times = []
    for _ in range(2):
        held.append(torch.ones(size // 4))
        times.append(measure(held.clear)[0])  # the last reference: its pages go back here
    r["free_s_per_gib"] = float(np.median(times)) / (size / GiB)


def _fill_into(held: list, shape: tuple, dtype: str) -> None:
    held.append(np.full(shape, 255, dtype=dtype))


LARGE_DRAWN = ("v0.9.0",)  # byte paths whose 1 GiB hash rate is drawn DRAWS times (the others once)


def large(r: dict, size: int, draws: Optional[dict] = None, n: int = DRAWS) -> None:
    """Fill, copy and ndarray-hash rates at ``size`` (the int64 fill the median of three: fresh pages'
    cost varies most between draws (0.66-2.03 s/GiB int64 in three back-to-back runs on 2026-12-03,
    results/cpu-amd-epyc-2c/same-day-2026-12-03-evening); the last int64 fill is the array hashed).
    The paths of LARGE_DRAWN drawn ``n`` times, their median stored (issue 43: v0.9.0's 1 GiB rate swung
    2.4-9.3 s/GiB between single draws, and start-up hashes 0.34-3.45 GiB items on it); the others once:
    v0.9.2 hashes a 0.26-0.29 GiB item at every setting (0.5 s of a 0.9.2 / 0.10.2 start-up), where its
    1 GiB rate weighs 0.4 in the interpolation, and the stream path's rate is flat with size
    (docs/cost-model.md "Draws")."""
    r["large.gib"] = size / GiB
    held: list = []  # the fill of the last draw (the int64 one hashed below: no second 1 GiB fill)
    arr = None
    for dt in VIDEO_DTYPES:
        shape = (size // (3 * np.dtype(dt).itemsize), 3)
        times = []
        for _ in range(3 if dt == "int64" else 1):  # int64: 0.8.5-0.10.2's dummy videos, up to 3.45 GiB at 128k
            held.clear()  # the previous draw's pages back before this one
            times.append(measure(partial(_fill_into, held, shape, dt))[0])
        r[f"large.fill_s_per_gib.{dt}"] = float(np.median(times)) / (size / GiB)
        arr = held.pop() if dt == "int64" else arr
        held.clear()
    assert arr is not None  # VIDEO_DTYPES has int64
    r["large.copy_s_per_gib"] = measure(torch.from_numpy(arr).clone)[0] / (arr.nbytes / GiB)  # a memcpy: per byte
    times_by: dict[str, list[float]] = {}
    for k in range(n):  # interleaved by path
        for path in BYTE_PATHS:
            if k == 0 or path in LARGE_DRAWN:
                s = measure(partial(hash_kwargs_by, path, model_id="m", item=arr))[0]
                times_by.setdefault(f"large.hash_s_per_gib.{path}.ndarray", []).append(s / (arr.nbytes / GiB))
    for key, values in times_by.items():
        drawn(r, draws, key, values)


def model(r: dict, model: str, draws: Optional[dict] = None, encoder_draws: int = DRAWS) -> None:
    """Fixed start-up costs of ``model`` at the small scale with SchedulerConfig's defaults; Qwen2.5-VL's
    encoder on each of ENCODER_PAIRS drawn ``encoder_draws`` times (the medians fitted)."""
    from refimpl.worker.gpu_model_runner import GPUModelRunner
    cfg = runner_config(model)
    k = f"model.{model}."
    rss0, t0 = rss_bytes(), time.perf_counter()
    runner = GPUModelRunner(cfg)
    r[k + "runner_s"] = time.perf_counter() - t0
    r[k + "load_s"] = measure(runner.load_model)[0]
    r[f"rss.model.{model}"] = max(0, rss_bytes() - rss0)
    tokens = cfg.scheduler_config.max_num_batched_tokens
    r[k + "dummy_run_s"], r[k + "dummy_run_peak"] = measure(lambda: runner._dummy_run(tokens))
    rss1 = rss_bytes()
    s = measure(lambda: runner.initialize_kv_cache(runner.determine_num_blocks()))[0]
    kv = sum(t.nbytes for t in runner.kv_caches)
    r[k + "kv_s_per_gib"], r[k + "kv_rss_per_byte"] = s / (kv / GiB), (rss_bytes() - rss1) / kv
    runner.kv_caches, runner.whisper_runner = [], None
    if cfg.model_config.is_encoder_decoder:
        fe = cfg.get_mm_registry().create_processor(cfg.model_config, disable_cache=True).info.get_feature_extractor()
        feats = torch.zeros(1, fe.feature_size, fe.nb_max_frames)
        r[k + "encoder_s_per_item"], r[k + "encoder_peak_per_item"] = measure(
            lambda: runner._run_encoder("audio", {"input_features": feats}))
    else:  # frame pairs of 1024, 4096 and 16384 tokens: s = c + a t + b t^2 per pair (full attention per frame)
        # in one batch of ENCODER_PAIRS pairs, as the profile run encodes a whole video: at 4096-5120 tokens a
        # pair costs up to 1.8x more in a batch of 8 than alone (docs/results.md, 2026-12-04), the same in 4 as in 7
        pair_tokens = [(side // 14) ** 2 // 4 for side, _ in ENCODER_PAIRS]
        secs: list[list[float]] = [[] for _ in ENCODER_PAIRS]
        peaks: list[list[float]] = [[] for _ in ENCODER_PAIRS]
        batches = [video_pairs(side, pairs) for side, pairs in ENCODER_PAIRS]  # built once, read by every draw
        for _ in range(encoder_draws):  # the draws interleaved by pair size
            for j, ((_, pairs), batch) in enumerate(zip(ENCODER_PAIRS, batches)):
                s, peak = measure(partial(runner._run_encoder, "video", batch))
                secs[j].append(s / pairs)  # per pair
                peaks[j].append(peak / pairs)  # per pair (per pair's tokens below)
        del batches
        points = [(n, median_draw(s), median_draw(p)) for n, s, p in zip(pair_tokens, secs, peaks)]
        # s = c + a t + b t^2 per pair, every coefficient >= 0 (fits.pair_price_fit: the price cannot go negative)
        c, a, b = pair_price_fit([p[0] for p in points], [p[1] for p in points])
        r[k + "encoder_pair_s"], r[k + "encoder_pair_s_per_token"], r[k + "encoder_pair_s_per_token2"] = c, a, b
        (n1, s1, _), (n2, s2, p2) = points[0], points[1]  # the power law's rates (calibrations before 0.2)
        r[k + "encoder_exponent"] = float(np.log(s2 / s1) / np.log(n2 / n1))
        drawn(r, draws, k + "encoder_s_at_tokens", secs[1])  # the 4096-token pair's seconds, every draw
        r[k + "encoder_tokens"] = n2
        r[k + "encoder_peak_per_token"] = p2 / n2
        # the activations per token shrink with the pair's size (45 kB at 4096 tokens, 30 kB at 16384 on
        # 2026-12-03): the largest pair's rate too, the one every profile item at >= 16k tokens has
        n3, _, p3 = points[-1]
        r[k + "encoder_pair_peak_per_token"], r[k + "encoder_pair_peak_tokens"] = p3 / n3, n3
    gc.collect()


