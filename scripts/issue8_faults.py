"""Issue 8's example inputs, one per fault kind, and the value each gives in this checkout.

    PYTHONPATH=. .venv/bin/python scripts/issue8_faults.py [--kinds 1,2,3,4,5,6]

Run it on a commit before and after the fixes to get the before / after values (the tests
named in docs/reliability.md guard each kind). Kind 1 serves whisper-tiny twice (~1 min).
"""
from __future__ import annotations

import argparse
import logging
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

PROMPT = "<|vision_start|><|image_pad|><|vision_end|>"


def _qwen(**kw):
    from refimpl.config import ModelConfig
    mpk = kw.pop("mm_processor_kwargs", None)
    try:
        return ModelConfig("qwen2.5-vl-3b", device="cpu", mm_processor_kwargs=mpk or {}, **kw)
    except TypeError as e:  # before the constructor took it
        print(f"  ModelConfig(mm_processor_kwargs=...) -> TypeError: {e}")
        mc = ModelConfig("qwen2.5-vl-3b", device="cpu", **kw)
        mc.mm_processor_kwargs = mpk or {}
        return mc


def kind1():
    from refimpl.audio import make_request_audios
    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.sampling_params import SamplingParams
    audios = make_request_audios(3, seed=1, max_s=8.0)
    runs = {}
    for blocks in (300, 900):
        e = LLMEngine.from_args("whisper-tiny", num_gpu_blocks=blocks, max_num_seqs=4)
        ps = [SamplingParams(max_tokens=150, ignore_eos=True, temperature=1.0, seed=100 + i) for i in range(3)]
        runs[blocks] = e.generate([{"multi_modal_data": {"audio": a}} for a in audios], ps)
    for i in range(3):
        a, b = runs[300][i], runs[900][i]
        diff = next((j for j, (x, y) in enumerate(zip(a.output_token_ids, b.output_token_ids)) if x != y), None)
        print(f"  request {i}: preemptions {a.num_preemptions} (300 blocks) / {b.num_preemptions} (900); "
              f"first differing token: {diff}")


def kind2():
    from refimpl.multimodal import MultiModalRegistry
    idx = np.arange(16, dtype=np.uint8).reshape(4, 4)
    ims = []
    for pal in (list(range(48)), list(range(48))[::-1]):
        im = Image.fromarray(idx, "L").convert("P")
        im.putpalette(pal)
        ims.append(im)
    proc = MultiModalRegistry().create_processor(_qwen(max_model_len=4096))
    outs = [proc.apply(PROMPT, {"image": im}, return_mm_hashes=True) for im in ims]
    same_key = outs[0].mm_hashes["image"] == outs[1].mm_hashes["image"]
    fresh = MultiModalRegistry().create_processor(_qwen(max_model_len=4096), disable_cache=True)
    right = torch.equal(outs[1].mm_kwargs["image"][0]["pixel_values"],
                        fresh.apply(PROMPT, {"image": ims[1]}).mm_kwargs["image"][0]["pixel_values"])
    print(f"  same key for different palettes: {same_key}; second image served its own pixel_values: {right}")


def kind3():
    from refimpl.multimodal import MultiModalRegistry
    x = Image.fromarray(np.random.default_rng(0).integers(0, 256, (56, 84, 3), dtype=np.uint8))
    proc = MultiModalRegistry().create_processor(_qwen(max_model_len=4096))
    ref = MultiModalRegistry().create_processor(_qwen(max_model_len=4096), disable_cache=True).apply(
        PROMPT, {"image": x}).mm_kwargs["image"][0]["pixel_values"]
    proc.apply(PROMPT, {"image": x}).mm_kwargs["image"][0]["pixel_values"].mul_(0.5)
    hit = proc.apply(PROMPT, {"image": x}).mm_kwargs["image"][0]
    print(f"  after mul_(0.5) on a result: next hit equals fresh processing: {torch.equal(hit['pixel_values'], ref)}")
    hit.pop("pixel_values")
    try:
        again = proc.apply(PROMPT, {"image": x}).mm_kwargs["image"][0]
        print(f"  after popping a key: next request has pixel_values: {'pixel_values' in again}")
    except KeyError as e:
        print(f"  after popping a key: next request raises KeyError({e})")


def kind4():
    from refimpl.multimodal import MultiModalRegistry
    mc = _qwen(max_model_len=32768, limit_mm_per_prompt={"image": 12, "video": 0},
               mm_processor_kwargs={"max_pixels": 768 * 28 * 28})
    reg = MultiModalRegistry()
    formula = reg.get_max_tokens_per_item_by_modality(mc, use_formula=True)
    processed = reg.get_max_tokens_per_item_by_modality(mc)
    real = reg.create_processor(mc).apply(PROMPT, {"image": Image.new("RGB", (2000, 1500))})
    print(f"  formula {formula}, dummy processing {processed}, a 2000x1500 image: "
          f"{real.mm_placeholders['image'][0].length} tokens")


def kind5():
    from refimpl.multimodal import MultiModalRegistry
    reg = MultiModalRegistry()
    mc = _qwen(max_model_len=4096, disable_mm_preprocessor_cache=True)
    proc = reg.create_processor(mc)
    for _ in range(3):
        proc.apply(PROMPT, {"image": Image.new("RGB", (56, 56), 7)})
    print(f"  disable_mm_preprocessor_cache=True, 3 identical images: {reg.stats.cache_hits} hits")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("refimpl").addHandler(handler)
    logging.getLogger("refimpl").setLevel(logging.WARNING)
    reg = MultiModalRegistry()
    small = _qwen(max_model_len=4096, mm_processor_cache_gb=1e-6, mm_processor_kwargs={"max_pixels": 28 * 28 * 16})
    for _ in range(2):
        reg.get_max_tokens_per_item_by_modality(small)
    warns = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    print(f"  cache of 1e-6 GiB < dummy item: {reg.stats.hf_mm_passes} HF passes for 2 budget calls, "
          f"warnings: {warns or 'none'}")


def kind6():
    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.errors import RefimplError
    try:
        LLMEngine.from_args("whisper-tiny", num_gpu_blocks=100)
        print("  accepted")
    except RefimplError as e:
        print(f"  {type(e).__name__}: field {e.field!r}, limit {e.limit!r}: {e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default="1,2,3,4,5,6")
    args = ap.parse_args()
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.ERROR)
    fns = {"1": kind1, "2": kind2, "3": kind3, "4": kind4, "5": kind5, "6": kind6}
    for k in args.kinds.split(","):
        print(f"kind {k}:")
        try:
            fns[k]()
        except Exception as e:  # noqa: BLE001 - a crash is a value to report here
            print(f"  crashed: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
