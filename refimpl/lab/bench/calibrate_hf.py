"""The calibration's HF-processor sections: Qwen2.5-VL's processor on images and videos (small frames
and the dummy's full-size frame) and Whisper's registry call and processor; each writes its rates
into the run's flat dict ``r`` (refimpl/lab/bench/calibrate.py says what each rate is). No vLLM
counterpart."""
from __future__ import annotations

import importlib
from functools import partial
from typing import Optional

import numpy as np
from PIL import Image

from refimpl.lab.bench.calibrate_measure import DRAWS, drawn, measure, median_of
from refimpl.lab.bench.rates import VIDEO_DTYPES

__all__ = ["hf_qwen", "whisper"]


def _side(pixels: float, factor: int = 28) -> int:
    return max(factor, factor * round(pixels ** 0.5 / factor))


def hf_qwen(r: dict, size: int, model: str, draws: Optional[dict] = None) -> None:
    from refimpl.config import ModelConfig
    from refimpl.multimodal.registry import MultiModalRegistry
    proc = MultiModalRegistry(0).create_processor(ModelConfig(model, device="cpu"), disable_cache=True)
    call, text = proc._call_hf_processor, proc.dummy_inputs.get_dummy_text
    r["hf.text_only_s"] = median_of(lambda: call(text({"image": 1}), {}, {}), n=5)[0]
    side = _side(size / 24)  # an image whose float32 patches take about ``size`` bytes
    img = Image.new("RGB", (side, side), (255, 255, 255))
    s, peak = measure(lambda: call(text({"image": 1}), {"image": [img]}, {}))
    r["hf.image_s_per_mp"] = max(0.0, s - r["hf.text_only_s"]) / (side * side / 1e6)
    r["hf.image_peak_per_pixel"] = peak / (side * side)
    vside = _side(size / 48)  # 4 frames whose float32 patches take about ``size`` bytes
    mp = vside * vside / 1e6
    for dt in VIDEO_DTYPES:  # 1, 2 and 4 frames: 1 and 2 give the same output (padded to 2 frames)
        t, x, peaks = [], [], []
        for frames in (1, 2, 4):
            video = np.full((frames, vside, vside, 3), 255, dtype=dt)
            s, peak = measure(partial(call, text({"video": 1}), {"video": [video]}, {}))
            t.append(max(0.0, s - r["hf.text_only_s"]))
            x.append((frames * mp, -(-frames // 2) * 2 * mp))
            peaks.append(peak / (vside * vside * 3))  # per element of one input frame
        # extra peak = input elements x p + output (padded) elements x q: a frame padded to the pair
        # holds float copies too (least squares over 1, 2 and 4 frames, neither below 0)
        p, q = np.linalg.lstsq(np.array(x) / mp, np.array(peaks), rcond=None)[0]
        p, q = (0.0, peaks[2] / 4) if p < 0 else (peaks[2] / 4, 0.0) if q < 0 else (p, q)
        r[f"hf.video_peak_per_element.{dt}"], r[f"hf.video_peak_per_out_element.{dt}"] = float(p), float(q)
        # t = input frame-MP x a + output (padded) frame-MP x b, least squares, neither below 0
        a, b = np.linalg.lstsq(np.array(x), np.array(t), rcond=None)[0]
        a, b = (0.0, t[2] / x[2][1]) if a < 0 else (t[2] / x[2][0], 0.0) if b < 0 else (a, b)
        r[f"hf.video_in_s_per_mp.{dt}"], r[f"hf.video_out_s_per_mp.{dt}"] = float(a), float(b)
    r["hf.video_frame_mp"], r["hf.image_mp"] = mp, side * side / 1e6
    _hf_full_frame(r, proc, draws)


def _hf_full_frame(r: dict, proc, draws: Optional[dict] = None, n: int = DRAWS) -> None:
    """The HF processor on the dummy's own frame (the model's largest image at its max_pixels: 3584 x
    3584 by default): an image, and a frame pair per dtype, each drawn ``n`` times (interleaved), in
    seconds per input MP (the pair's input and output frame-MP are equal): per MP a full-size frame costs
    more than the small frames of ``hf_qwen`` (docs/cost-model.md "Rates by size")."""
    call, text = proc._call_hf_processor, proc.dummy_inputs.get_dummy_text
    w, h = proc.info.get_image_size_with_most_features()
    mp = w * h / 1e6
    r["large.hf.frame_mp"] = mp
    img = Image.new("RGB", (w, h), (255, 255, 255))
    videos = {dt: np.full((2, h, w, 3), 255, dtype=dt) for dt in VIDEO_DTYPES}
    times: dict[str, list[float]] = {}
    for _ in range(n):
        s = measure(lambda: call(text({"image": 1}), {"image": [img]}, {}))[0]
        times.setdefault("large.hf.image_s_per_mp", []).append(max(0.0, s - r["hf.text_only_s"]) / mp)
        for dt, video in videos.items():
            s = measure(partial(call, text({"video": 1}), {"video": [video]}, {}))[0]
            times.setdefault(f"large.hf.video_s_per_mp.{dt}", []).append(max(0.0, s - r["hf.text_only_s"]) / (2 * mp))
    del videos
    for key, values in times.items():
        drawn(r, draws, key, values)


def whisper(r: dict, model: str) -> None:
    """One uncached ``get_encdec_max_encoder_len`` call, a text-only HF call and the extra seconds of
    one 30 s clip in it."""
    from refimpl.config import ModelConfig
    from refimpl.multimodal.registry import MultiModalRegistry
    mc, reg = ModelConfig(model, device="cpu"), MultiModalRegistry(0)
    reg.get_encdec_max_encoder_len(mc)  # its processors built once
    r[f"model.{model}.registry_call_s"] = median_of(lambda: reg.get_encdec_max_encoder_len(mc), n=3)[0]
    fe = reg.create_processor(mc, disable_cache=True).info.get_feature_extractor()
    proc = importlib.import_module("refimpl.multimodal.whisper").build_hf_processor(model)
    audio = np.zeros(fe.chunk_length * fe.sampling_rate, dtype=np.float64)
    text = median_of(partial(proc, text="<|startoftranscript|>", return_tensors="pt"), n=3)[0]
    r[f"hf.text_only_s.{model}"] = text
    r[f"hf.audio_s_per_item.{model}"] = max(0.0, median_of(partial(
        proc, text="<|startoftranscript|>", audio=[audio], sampling_rate=fe.sampling_rate, return_tensors="pt"), n=2)[0]
        - text)
