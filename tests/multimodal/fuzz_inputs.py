"""Hypothesis strategies and the checked call for fuzzing the processor entry point.

Used by tests/multimodal/test_fuzz_processor.py (~200 cases in the fast suite) and tests/soak/test_soak.py
(10,000 cases, ``soak`` marker). ``fuzz_case`` feeds one generated ``(model, prompt,
mm_data)`` to ``BaseMultiModalProcessor.apply`` of a small Qwen2.5-VL (64-patch max_pixels)
or Whisper processor sharing one small processing cache: it must either return
MultiModalInputs consistent with its items or raise a refimpl exception (RefimplError,
with field and limit); anything else is a crash and fails the test.
"""
from __future__ import annotations

import io

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.errors import RefimplError
from refimpl.multimodal import MultiModalRegistry
from refimpl.testing.strategies import as_tensors


def _png(size=(20, 12), mode="RGB") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, 99).save(buf, format="PNG")
    return buf.getvalue()


def _jpeg(size=(20, 12)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (9, 90, 200)).save(buf, format="JPEG")
    return buf.getvalue()


SEEDS = [_png(), _png((3, 300), "L"), _png((16, 16), "RGBA"), _jpeg()]


@st.composite
def mutated_bytes(draw):
    """A valid small PNG/JPEG with a few bytes replaced, cut or extended."""
    b = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(b) - 1))
        b[i] = draw(st.integers(0, 255))
    cut = draw(st.one_of(st.none(), st.integers(0, len(b))))
    if cut is not None:
        b = b[:cut]
    return bytes(b) + draw(st.binary(max_size=16))


DTYPES = st.sampled_from([np.uint8, np.uint16, np.int16, np.int64, np.float16, np.float32,
                          np.float64, np.bool_, np.complex64])


def arrays(max_rank=4, max_side=40, min_rank=0):
    return hnp.arrays(DTYPES, hnp.array_shapes(min_dims=min_rank, max_dims=max_rank, min_side=0,
                                               max_side=max_side))


def tensors(items):
    """``items``' arrays as torch tensors of any dtype (bf16, fp8, complex, bool, ...), with
    requires_grad, non-contiguous or on the meta device (refimpl.testing.strategies.as_tensors)."""
    return as_tensors(items.filter(lambda a: isinstance(a, np.ndarray) and a.dtype != object))


def image_items():
    return st.one_of(
        tensors(hnp.arrays(np.uint8, st.tuples(st.integers(0, 60), st.integers(0, 60),
                                               st.sampled_from([1, 3, 4])))),
        st.binary(max_size=300), mutated_bytes(),
        arrays(max_rank=4, max_side=40),
        hnp.arrays(np.uint8, st.tuples(st.integers(0, 60), st.integers(0, 60),
                                       st.sampled_from([1, 2, 3, 4]))),
        st.builds(lambda m, w, h: Image.new(m, (w, h)),
                  st.sampled_from(["RGB", "L", "LA", "P", "CMYK", "I;16", "I", "F", "1", "RGBA", "La"]),
                  st.integers(0, 80), st.integers(0, 80)),
        st.none(), st.integers(), st.text(max_size=5))


def video_items():
    return st.one_of(
        tensors(hnp.arrays(np.uint8, st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 60),
                                               st.sampled_from([1, 3])))),
        arrays(max_rank=5, max_side=6),
        hnp.arrays(st.sampled_from([np.uint8, np.float32, np.int64]),
                   st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 60),
                             st.sampled_from([1, 3, 4]))),
        st.lists(image_items(), max_size=3))


def audio_items():
    arr = st.one_of(
        arrays(max_rank=2, max_side=50),
        hnp.arrays(st.sampled_from([np.float32, np.float64, np.float16]),
                   st.integers(0, 20000),
                   elements=st.floats(-2, 2, width=16) | st.sampled_from([np.nan, np.inf, 0.0])))
    arr = st.one_of(arr, tensors(hnp.arrays(np.float32, st.integers(0, 20000),
                                            elements=st.floats(-1, 1, width=32))))
    return st.one_of(arr, st.tuples(arr, st.sampled_from([16000, 8000, 0, -1, 16000.0])),
                     st.tuples(arr), st.none(), st.binary(max_size=64))


QWEN_PH = ["<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "hello ", "<|endoftext|>"]


def qwen_prompts():
    return st.one_of(st.lists(st.sampled_from(QWEN_PH), max_size=5).map("".join),
                     st.text(max_size=20),
                     st.lists(st.integers(0, 151_700), max_size=12))


def mm_datas(items_by_modality):
    one = st.one_of(*[st.tuples(st.just(m), st.one_of(s, st.lists(s, max_size=3)))
                      for m, s in items_by_modality.items()],
                    st.tuples(st.text(max_size=6), st.none()))
    return st.one_of(st.lists(one, max_size=3).map(dict), st.none(), st.lists(st.integers(), max_size=2))


@st.composite
def fuzz_cases(draw):
    if draw(st.booleans()):
        return "qwen", draw(qwen_prompts()), draw(mm_datas({"image": image_items(), "video": video_items()}))
    prompt = draw(st.one_of(st.just("<|startoftranscript|>"), st.text(max_size=10),
                            st.lists(st.integers(0, 51_000), max_size=5)))
    return "whisper", prompt, draw(mm_datas({"audio": audio_items()}))


class Fuzzer:
    """Holds the processors; ``__call__`` checks one case; counts outcomes."""

    def __init__(self):
        self.reg = MultiModalRegistry(cache_bytes=2 << 20)
        q = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu",
                        limit_mm_per_prompt={"image": 2, "video": 1}, mm_processor_cache_gb=2 / 1024)
        q.mm_processor_kwargs = {"max_pixels": 28 * 28 * 64}
        w = ModelConfig("whisper-tiny", device="cpu", mm_processor_cache_gb=2 / 1024)
        self.procs = {"qwen": self.reg.create_processor(q), "whisper": self.reg.create_processor(w)}
        self.counts = {"cases": 0, "accepted": 0, "refused": 0}
        self.errors: dict[str, int] = {}

    def __call__(self, case) -> None:
        model, prompt, mm_data = case
        self.counts["cases"] += 1
        try:
            out = self.procs[model].apply(prompt, mm_data)
        except RefimplError as e:
            assert e.field and e.limit is not None and e.field in str(e)
            self.counts["refused"] += 1
            self.errors[type(e).__name__] = self.errors.get(type(e).__name__, 0) + 1
        else:
            self.counts["accepted"] += 1
            for m, ph in out.mm_placeholders.items():
                assert len(ph) == len(out.mm_kwargs[m]) == len(out.mm_hashes[m])
                ids = out.encoder_prompt_token_ids if model == "whisper" else out.prompt_token_ids
                for p in ph:
                    assert 0 <= p.offset and p.offset + p.length <= len(ids)
        c = self.reg.processing_cache
        assert c.bytes <= c.capacity_bytes
