"""Print what the kit does with issue 46's five example inputs (docs/reliability.md section 10).

Usage: PYTHONPATH=. .venv/bin/python scripts/issue46_faults.py [kind ...]   (kinds 1-5; default all)

Public API only, so the same script runs on the commit before the fixes and after. Each line:
the input, then what happened (a served result, or the exception's type, field and limit).
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _outcome(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the point is to print what escapes
        return f"{type(e).__name__} field={getattr(e, 'field', None)!r} limit={getattr(e, 'limit', None)!r}: {e}"[:220]


def kind1():
    import numpy as np

    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.sampling_params import SamplingParams
    eng = LLMEngine.from_args("whisper-tiny", device="cpu", process_mode="inproc")
    a = {"audio": (np.random.default_rng(0).normal(0, 0.1, 16000).astype(np.float32), 16000)}
    fr = "<|startoftranscript|><|fr|><|translate|><|notimestamps|>"
    cases = {"decoder_prompt=[50258, 50265, 50358, 50363]": {"multi_modal_data": a, "decoder_prompt": [50258, 50265, 50358, 50363]},
             "decoder_prompt=None": {"multi_modal_data": a, "decoder_prompt": None},
             "decoder_prompt=5": {"multi_modal_data": a, "decoder_prompt": 5},
             "prompt_token_ids=None": {"multi_modal_data": a, "prompt_token_ids": None},
             "implicit {'prompt': fr, ...}": {"prompt": fr, "multi_modal_data": a},
             "explicit {'encoder_prompt': ..., 'decoder_prompt': fr}": {
                 "encoder_prompt": {"prompt": "", "multi_modal_data": a}, "decoder_prompt": fr}}
    for name, d in cases.items():
        def run(d=d, name=name):
            eng.add_request(name, d, SamplingParams(max_tokens=2))
            outs = []
            while eng.has_unfinished_requests():
                outs += eng.step()
            o = next(x for x in outs if x.request_id == name)
            return f"served, decoder prompt {o.prompt_token_ids}"
        print(f"kind 1  {name}: {_outcome(run)}")
    eng.shutdown()


def kind2():
    import numpy as np
    from PIL import Image

    from refimpl.config import ModelConfig
    from refimpl.multimodal.registry import MultiModalRegistry
    from refimpl.testing.oracles import max_tokens_per_item
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu", mm_processor_kwargs={"max_pixels": 64 * 28 * 28})
    p = MultiModalRegistry().create_processor(mc)
    img = Image.fromarray(np.random.default_rng(0).integers(0, 256, (448, 448, 3), dtype=np.uint8))
    print("kind 2  max_tokens_per_item:", max_tokens_per_item("qwen2.5-vl-3b", max_model_len=4096,
                                                             mm_processor_kwargs={"max_pixels": 64 * 28 * 28}))
    for kw in (None, {"max_pixels": 16 * 28 * 28}, {"max_pixels": -5}, {"max_pixel": 12544}, {"do_resize": False}):
        print(f"kind 2  {kw}:", _outcome(lambda kw=kw: f"{p.apply('<|image_pad|>', {'image': img}, kw).mm_placeholders['image'][0].length} tokens"))


def kind3():
    import numpy as np
    from PIL import Image

    from refimpl.config import ModelConfig
    from refimpl.multimodal.registry import MultiModalRegistry
    p = MultiModalRegistry().create_processor(ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu"))
    stack = np.random.default_rng(0).integers(0, 256, (4, 56, 56, 3), dtype=np.uint8)
    for name, v in (("(4, 56, 56, 3) array", stack), ("list of 4 PIL images", [Image.fromarray(f) for f in stack]),
                    ("list of 4 arrays", list(stack))):
        print(f"kind 3  {name}:", _outcome(lambda v=v: "grid " + str(
            p.apply("<|video_pad|>", {"video": v}).mm_kwargs["video"][0]["video_grid_thw"].tolist())))


def kind4():
    import numpy as np

    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.multimodal.processing import BaseMultiModalProcessor
    from refimpl.sampling_params import SamplingParams
    calls = []
    orig = BaseMultiModalProcessor._hash
    BaseMultiModalProcessor._hash = lambda self, *a: calls.append(1) or orig(self, *a)  # type: ignore[method-assign]
    for name, kw in (("cache on", {}), ("mm_processor_cache_gb=0", {"mm_processor_cache_gb": 0}),
                     ("disable_mm_preprocessor_cache=True", {"disable_mm_preprocessor_cache": True})):
        eng = LLMEngine.from_args("whisper-tiny", device="cpu", process_mode="inproc", **kw)
        calls.clear()
        for i in range(3):
            eng.add_request(str(i), {"multi_modal_data": {"audio": (np.full(8000 * (i + 1), 0.01, np.float32), 16000)}},
                            SamplingParams(max_tokens=1))
        while eng.has_unfinished_requests():
            eng.step()
        print(f"kind 4  {name}: {len(calls)} content hashes serving 3 audios")
        eng.shutdown()
    BaseMultiModalProcessor._hash = orig  # type: ignore[method-assign]


def kind5():
    from refimpl.testing import FakeModelRunner, create_requests, create_scheduler, run_to_completion
    for pos in (3, 2):
        s = create_scheduler()
        (req,) = create_requests(1, max_tokens=3, ignore_eos=False)
        s.add_request(req)
        toks = [1000] * (pos - 1) + [50257] + [1000] * 5
        out = run_to_completion(s, FakeModelRunner(94, lambda rid, n, toks=toks: toks[n - 4]))["req0"]
        print(f"kind 5  EOS as output {pos} of max_tokens=3: finish_reason {out.finish_reason!r}, "
              f"outputs {out.output_token_ids}")


if __name__ == "__main__":
    import torch
    torch.set_num_threads(1)
    for k in sys.argv[1:] or "12345":
        globals()[f"kind{k}"]()
