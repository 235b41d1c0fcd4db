"""ProcessingCache and MultiModalHasher: key sensitivity, byte bound, reset frees memory."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.multimodal import MultiModalHasher, MultiModalRegistry, ProcessingCache

H = MultiModalHasher.hash_kwargs


def _img(seed=0, size=(64, 48)):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (*size[::-1], 3), dtype=np.uint8))


def test_key_changes_with_every_keyed_part():
    img, arr = _img(), np.zeros(1600, np.float32)
    base = dict(model_id="qwen2.5-vl-3b", modality="image", item=img, max_pixels=50176, min_pixels=3136)
    k = H(**base)
    assert len(k) == 64 and H(**base) == k
    assert H(**(base | {"model_id": "whisper-tiny"})) != k
    assert H(**(base | {"modality": "video"})) != k
    assert H(**(base | {"max_pixels": 50177})) != k
    assert H(**(base | {"min_pixels": 3137})) != k
    assert H(**{k2: v for k2, v in base.items() if k2 != "min_pixels"}) != k
    assert H(**(base | {"fps": 2.0})) != k
    # same content, different objects -> same key; one pixel / mode / size changed -> new key
    assert H(**(base | {"item": _img()})) == k
    px = np.asarray(img).copy()
    px[0, 0, 0] ^= 1
    assert H(**(base | {"item": Image.fromarray(px)})) != k
    assert H(**(base | {"item": img.convert("RGBA")})) != k
    assert H(**(base | {"item": _img(size=(48, 64))})) != H(**(base | {"item": _img(size=(64, 48))}))
    # ndarray: dtype and shape are keyed, not only the bytes
    a = dict(model_id="m", modality="audio", item=arr)
    assert H(**a) == H(**(a | {"item": arr.copy()}))
    assert H(**a) != H(**(a | {"item": arr.view(np.int32)}))
    assert H(**a) != H(**(a | {"item": arr.reshape(40, 40)}))
    assert H(**(a | {"item": torch.zeros(3)})) != H(**(a | {"item": torch.zeros(3, dtype=torch.float64)}))
    # kwargs order does not matter
    assert H(b=1, a=2) == H(a=2, b=1)


def _val(nbytes: int):
    return {"x": torch.zeros(nbytes, dtype=torch.uint8)}


def test_lru_and_oversized_item():
    c = ProcessingCache(100)
    assert c.put("a", _val(40)) and c.put("b", _val(40))
    assert c.get("a") is not None  # a is now most recent
    c.put("c", _val(40))  # evicts b
    assert "b" not in c and "a" in c and "c" in c and c.bytes == 80 and c.evictions == 1
    assert c.get("b") is None and (c.hits, c.misses) == (1, 1)
    assert not c.put("big", _val(101))  # larger than the cache: not stored, nothing evicted
    assert len(c) == 2 and c.bytes == 80 and c.evictions == 1 and c.rejected == 1
    c.put("a", _val(10))  # replacing an entry updates the byte count
    assert c.bytes == 50
    z = ProcessingCache(0)
    assert not z.put("a", _val(1)) and len(z) == 0 and z.bytes == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 300)), max_size=80),
       st.integers(0, 500))
def test_byte_bound_holds(ops, cap):
    c = ProcessingCache(cap)
    for key, size in ops:
        c.put(str(key), _val(size))
        assert c.bytes <= cap
        assert c.bytes == sum(v.nbytes for k in list(c._data) for v in c._data[k][0].values())


def test_bound_holds_under_many_distinct_items_through_processor():
    reg = MultiModalRegistry()
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu", limit_mm_per_prompt={"image": 1},
                     mm_processor_cache_gb=200_000 / 2**30)  # ~200 kB: a handful of items
    proc = reg.create_processor(mc)
    for i in range(30):
        out = proc.apply("<|image_pad|>", {"image": _img(i, (56 + 28 * (i % 3), 56))})
        assert reg.processing_cache.bytes <= 200_000
        assert out.mm_placeholders["image"][0].length == out.mm_kwargs["image"][0]["image_grid_thw"].prod() // 4
    assert reg.processing_cache.evictions > 0 and 0 < len(reg.processing_cache) < 30
