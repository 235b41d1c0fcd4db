"""refimpl's copy of Qwen2-VL's smart_resize (the dry plan's) is transformers' function."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize as hf_smart_resize

from refimpl.multimodal.smart_resize import smart_resize


@settings(max_examples=400, deadline=None)
@given(h=st.integers(1, 20000), w=st.integers(1, 20000), factor=st.sampled_from([14, 28, 56]),
       lo=st.integers(1, 1 << 16), span=st.integers(0, 1 << 24))
def test_it_is_transformers_smart_resize(h, w, factor, lo, span):
    kw = dict(factor=factor, min_pixels=lo, max_pixels=lo + span)
    try:
        want = hf_smart_resize(h, w, **kw)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e).split(",")[0]):
            smart_resize(h, w, **kw)
    else:
        assert smart_resize(h, w, **kw) == want


@pytest.mark.parametrize("hw", [(1, 200), (1, 201), (9999999, 9999999), (28, 28)])
def test_the_declared_ends(hw):
    args = dict(factor=28, min_pixels=56 * 56, max_pixels=12845056)
    if max(hw) / min(hw) > 200:
        with pytest.raises(ValueError, match="aspect ratio"):
            smart_resize(*hw, **args)
    else:
        assert smart_resize(*hw, **args) == hf_smart_resize(*hw, **args)
