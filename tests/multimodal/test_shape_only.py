"""shape-only start-up (ours): the dummy data's processed tensors, built from the processor's
size functions, equal those of real processing in shape, dtype, token ids, placeholders and
budgets, for every supported model and several max_model_len / limit_mm_per_prompt / pixel
settings, with zero HF-processor passes. Small max_pixels keep the processing cheap; one case
keeps the real 3584x3584 worst case (image only)."""
import pytest

from refimpl.config import ModelConfig, MultiModalSwitches, SchedulerConfig
from refimpl.core.encoder_cache_manager import compute_encoder_budget
from refimpl.multimodal import MultiModalProfiler, MultiModalRegistry
from tests.multimodal.utils import assert_same_inputs

pytestmark = pytest.mark.slow  # dummy data at real size


SHAPE_ONLY = MultiModalSwitches(shape_only=True)

# (model, max_model_len, limit_mm_per_prompt, mm_processor_kwargs)
CASES = [
    ("qwen2.5-vl-3b", 20000, {"video": 0}, {}),                         # real worst case
    ("qwen2.5-vl-3b", 3000, {"image": 2, "video": 1}, {"max_pixels": 28 * 28 * 6}),  # 6: not square
    ("qwen2.5-vl-3b", 4000, {"image": 0}, {"max_pixels": 28 * 28 * 30}),
    ("whisper-tiny", 448, {}, {}),
    ("whisper-large-v3", 200, {}, {}),
]


def _config(model, max_model_len, limits, kwargs, switches=None):
    mc = ModelConfig(model, max_model_len=max_model_len, device="cpu", limit_mm_per_prompt=limits,
                     **({"mm_switches": switches} if switches else {}))
    mc.mm_processor_kwargs = kwargs
    return mc


@pytest.mark.parametrize("model,max_model_len,limits,kwargs", CASES)
def test_shape_only_equals_processed_dummy_data(model, max_model_len, limits, kwargs):
    reg = MultiModalRegistry()
    real = _config(model, max_model_len, limits, kwargs)
    fake = _config(model, max_model_len, limits, kwargs, SHAPE_ONLY)
    # The processed side uses the cache (its repeated passes over the same items then hit).
    pr, pf = (MultiModalProfiler(reg.create_processor(c)) for c in (real, fake))
    limits_all = pr.get_mm_limits()
    counts = {m: n for m, n in limits_all.items() if n > 0}
    ones = {m: 1 for m in counts}
    sc = SchedulerConfig(max_num_batched_tokens=8192)
    reg.reset_stats()
    shaped = (pf._get_dummy_mm_inputs(max_model_len, counts), pf._get_dummy_mm_inputs(sc.max_num_batched_tokens, ones),
              pf.get_mm_max_tokens(max_model_len, ones), compute_encoder_budget(fake, sc, reg))
    assert reg.stats.hf_processor_calls == 0  # not one HF-processor call, text-only included
    processed = (pr._get_dummy_mm_inputs(max_model_len, counts), pr._get_dummy_mm_inputs(sc.max_num_batched_tokens, ones),
                 pr.get_mm_max_tokens(max_model_len, ones), compute_encoder_budget(real, sc, reg))
    assert reg.stats.hf_mm_passes > 0
    assert_same_inputs(shaped[0], processed[0], values=False)
    assert_same_inputs(shaped[1], processed[1], values=False)
    assert shaped[2] == processed[2] and shaped[3] == processed[3]
