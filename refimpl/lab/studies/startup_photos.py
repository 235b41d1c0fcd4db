"""The start-up study's real-input pass (notebook 01): real photos and a video of real frames
through the processor twice, the second pass from the processing cache. Re-exported by
refimpl/lab/studies/startup.py."""
from __future__ import annotations

import time

import torch

from refimpl.config import ModelConfig
from refimpl.multimodal import MULTIMODAL_REGISTRY as reg
from refimpl.multimodal.photos import load_sample_photos, pan_video


def photos_demo(model: str = "qwen2.5-vl-3b", n: int = 3, video: bool = True) -> dict:
    """The real-input section: ``n`` photos and a video of real frames through the processor twice.
    {"photos", "video" (shape), "pass1"/"pass2" (s, hits, misses, passes), "identical", "tokens"}."""
    photos = load_sample_photos()[:n]
    vid = pan_video() if video else None
    mc = ModelConfig(model, limit_mm_per_prompt={"image": len(photos), "video": int(video)})
    proc = reg.create_processor(mc)
    prompt = "".join("<|vision_start|><|image_pad|><|vision_end|>" for _ in photos)
    prompt += "<|vision_start|><|video_pad|><|vision_end|>" * int(video) + "Describe."
    mm_data = {"image": [im for _, im in photos], **({"video": [vid]} if video else {})}
    reg.reset_processor_cache()
    outs, passes = [], {}
    for name in ("pass1", "pass2"):
        reg.reset_stats()
        t0 = time.perf_counter()
        outs.append(proc.apply(prompt, mm_data))
        st = reg.stats
        passes[name] = {"s": time.perf_counter() - t0, "hits": st.cache_hits,
                        "misses": st.cache_misses, "hf_mm_passes": st.hf_mm_passes}
    a, b = outs
    same = a.prompt_token_ids == b.prompt_token_ids and all(
        torch.equal(x[k], y[k]) for m in a.mm_kwargs for x, y in zip(a.mm_kwargs[m], b.mm_kwargs[m])
        for k in x)
    reg.reset_processor_cache()
    return {"photos": [(nm, im.size) for nm, im in photos], "video": None if vid is None else vid.shape,
            **passes, "identical": same, "tokens": len(a.prompt_token_ids)}
