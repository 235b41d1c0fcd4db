"""vLLM-version mechanics of the processing cache: the hashing byte paths (full copies per
hash: 1 in vLLM 0.8.5, 3 in 0.9.0, 2 after PR #19484, none after PR #24925), and items larger than the
cache (vLLM 0.9.0 raised "value too large", issue #52835; PR #53016 serves them uncached)."""
import tracemalloc

import numpy as np
import pytest
import torch

from refimpl.config import ModelConfig, MultiModalSwitches
from refimpl.errors import CacheItemTooLargeError
from refimpl.multimodal import MultiModalRegistry, ProcessingCache
from refimpl.multimodal.hasher import hash_kwargs_by

ARR = np.full((4, 64, 64, 3), 255)  # np.full's default dtype: int64, as vLLM 0.9.0's video


def _peak_copies(path: str, obj) -> float:
    """Peak bytes allocated while hashing ``obj``, in units of its size."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    hash_kwargs_by(path, model_id="m", video=obj)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak / ARR.nbytes


@pytest.mark.parametrize("path,copies", [("v0.8.5", 1), ("v0.9.0", 3), ("v0.9.2", 2), ("stream", 0)])
def test_full_copies_per_hash(path, copies):
    assert ARR.dtype == np.int64
    assert copies <= _peak_copies(path, ARR) < copies + 0.5


def test_byte_paths_agree_on_equality_not_on_keys():
    a, b = ARR.copy(), ARR.copy()
    b[0, 0, 0, 0] = 0
    for path in ("v0.9.0", "v0.9.2", "stream"):
        assert hash_kwargs_by(path, x=a) == hash_kwargs_by(path, x=ARR.copy()) != hash_kwargs_by(path, x=b)
    # 0.9.0 and 0.9.2 feed blake3 the same bytes; only the copies differ.
    assert hash_kwargs_by("v0.9.0", x=a, y=torch.ones(3)) == hash_kwargs_by("v0.9.2", x=a, y=torch.ones(3))
    assert hash_kwargs_by("v0.9.0", x=a) != hash_kwargs_by("v0.9.0", x=a.astype(np.uint8))
    with pytest.raises(ValueError):
        hash_kwargs_by("v0.8", x=a)
    # vLLM 0.8.5 hashed the raw bytes alone: the same bytes in another shape share a key
    assert hash_kwargs_by("v0.8.5", x=a) == hash_kwargs_by("v0.8.5", x=a.reshape(-1)) != hash_kwargs_by("v0.8.5", x=b)
    assert hash_kwargs_by("v0.9.0", x=a) != hash_kwargs_by("v0.9.0", x=a.reshape(-1))


def _val(nbytes):
    return {"pixel_values": torch.zeros(nbytes, dtype=torch.uint8)}


def test_oversize_item_raise_like_vllm_0_9_0_or_skip_like_later():
    c = ProcessingCache(100)
    assert c.put("a", _val(60))
    assert not c.put("big", _val(101), oversize="skip") and "a" in c  # PR #53016: served uncached
    with pytest.raises(CacheItemTooLargeError, match="value too large") as e:
        c.put("big", _val(101), oversize="raise")  # vLLM 0.9.0 (issue #52835)
    assert isinstance(e.value, ValueError) and e.value.field == "mm_processor_cache_gb"
    assert "a" in c and c.bytes == 60 and c.rejected == 2  # nothing evicted either way


@pytest.mark.parametrize("oversize", ["raise", "skip"])
def test_oversize_dummy_item_through_the_processor(oversize):
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=2048, device="cpu", limit_mm_per_prompt={"video": 0},
                     mm_processor_cache_gb=1e-6, mm_switches=MultiModalSwitches(oversize_item=oversize))
    mc.mm_processor_kwargs = {"max_pixels": 28 * 28 * 16}
    reg = MultiModalRegistry()
    proc = reg.create_processor(mc)
    inp = proc.dummy_inputs.get_dummy_processor_inputs(2048, {"image": 1})
    if oversize == "raise":
        with pytest.raises(CacheItemTooLargeError):
            proc.apply(inp.prompt, inp.mm_data)
    else:
        out = proc.apply(inp.prompt, inp.mm_data)
        rows = 4 * proc.info.get_max_image_tokens()  # 4 patches per token (merge 2 x 2)
        assert out.mm_kwargs["image"][0]["pixel_values"].shape[0] == rows and len(reg.processing_cache) == 0


def test_real_frame_video_through_the_processor():
    from refimpl.multimodal.photos import pan_video
    vid = pan_video(num_frames=4, size=(112, 84))
    assert vid.shape == (4, 84, 112, 3) and vid.dtype == np.uint8
    assert len({f.tobytes() for f in vid}) == 4 and vid.std() > 10  # moving, non-constant
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu", limit_mm_per_prompt={"image": 0})
    reg = MultiModalRegistry()
    proc = reg.create_processor(mc)
    a, b = (proc.apply("<|video_pad|>", {"video": v}) for v in (vid, vid.copy()))
    pv = a.mm_kwargs["video"][0]["pixel_values_videos"]
    assert pv.std() > 0.1 and torch.equal(pv, b.mm_kwargs["video"][0]["pixel_values_videos"])
    assert reg.stats.cache_hits == 1 and a.mm_hashes == b.mm_hashes
    assert proc.apply("<|video_pad|>", {"video": vid[::-1].copy()}).mm_hashes != a.mm_hashes
