"""Whisper's encoder length per release: PR #29421's budget (0.13.0), the cross-attention
sizing 0.13.0 took from it and 0.14.0's partial fix, caught by the kit's guard; 0.10.2's
registry call at its real cost (float64 clip hashed through 0.9.2's join; the KV check's
calls)."""
import numpy as np
import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.core.encoder_cache_manager import compute_encoder_budget
from refimpl.core.kv_cache_utils import cross_attention_sizing
from refimpl.engine.core import EngineCore, check_encoder_len
from refimpl.errors import EncoderLengthMismatchError
from refimpl.multimodal import MultiModalRegistry
from refimpl.testing import FakeRegistry, create_requests, create_scheduler
from refimpl.variants import ENCODER_LEN_VARIANTS
from refimpl.worker.gpu_model_runner import GPUModelRunner


def whisper(variant: str, batched: int = 8192, model: str = "whisper-large-v3", dtype="float16"):
    return VllmConfig(ModelConfig(model, device="cpu", scale="full", dtype=dtype),
                      SchedulerConfig(max_num_batched_tokens=batched), CacheConfig(block_size=16),
                      encoder_len_variant=variant, mm_registry=FakeRegistry())


@pytest.mark.parametrize("batched", [8192, 32768])
def test_0_13_0_sizes_cross_attention_from_the_budget(batched):
    fixed, v13, v14 = (cross_attention_sizing(whisper(v, batched)) for v in ("0.11.0", "0.13.0", "0.14.0"))
    per_block = 32 * 2 * 16 * 1280 * 2  # large-v3 decoder layers x (K, V) x block x d_model x fp16
    assert fixed.bytes_per_block == v13.bytes_per_block == per_block
    assert fixed.scheduler_blocks == fixed.needed_blocks == fixed.kv_check_blocks == 94
    blocks = batched // 16  # 512 at 8192, 2048 at 32768
    assert (v13.scheduler_blocks, v13.block_table_width, v13.kv_check_blocks) == (blocks,) * 3
    assert v13.scheduler_bytes == blocks * per_block and v13.needed_bytes == 94 * per_block
    # 0.14.0 fixed the scheduler only
    assert v14.scheduler_blocks == 94 and (v14.block_table_width, v14.kv_check_blocks) == (blocks, blocks)


def test_0_13_0_budget_follows_max_num_batched_tokens():
    cfg = whisper("0.13.0", model="whisper-tiny", dtype="float32")
    assert cfg.scheduler_config.max_num_encoder_input_tokens == 8192  # PR #29421: not overridden
    assert whisper("0.11.0").scheduler_config.max_num_encoder_input_tokens == 1500
    budget, _ = compute_encoder_budget(cfg.model_config, cfg.scheduler_config, FakeBudgetRegistry())
    assert budget // 1500 == 5  # 8192 holds 5 audios per step


class FakeBudgetRegistry(FakeRegistry):
    def supports_multimodal_inputs(self, model_config):
        return True

    def get_max_tokens_per_item_by_nonzero_modality(self, model_config, **kw):
        return {"audio": 1500}


@pytest.mark.parametrize("variant", ["0.13.0", "0.14.0"])
def test_the_guard_refuses_sizing_from_the_budget_by_default(variant):
    cfg = whisper(variant, model="whisper-tiny", dtype="float32")
    with pytest.raises(EncoderLengthMismatchError) as e:
        check_encoder_len(cfg)
    assert e.value.field == "scheduler_config.max_num_encoder_input_tokens" and e.value.limit == 1500
    with pytest.raises(EncoderLengthMismatchError):
        EngineCore(cfg, "refimpl")


@pytest.mark.parametrize("variant,cross", [("0.13.0", 512), ("0.14.0", 94), ("0.11.0", 94)])
def test_the_scheduler_without_its_guard_allocates_what_the_release_did(variant, cross):
    s = create_scheduler(num_blocks=4000, encoder_len_variant=variant, encoder_compute_budget=8192,
                         encoder_cache_size=8192, mm_registry=FakeRegistry())
    s.check_encoder_len = False  # what the release did
    for r in create_requests(6, max_tokens=2):
        s.add_request(r)
    out = s.schedule()
    first = out.scheduled_new_reqs[0]
    assert len(first.block_ids[1]) == cross
    assert len(out.scheduled_encoder_inputs) == 5  # 8192 // 1500 audios encoded in one step


def test_audios_per_step_is_a_what_if_not_a_release():
    v = ENCODER_LEN_VARIANTS["audios-per-step"]
    assert v.release is None and v.encoder_batch and "29421" not in v.reproduces
    assert ENCODER_LEN_VARIANTS["0.13.0"].encoder_budget == "batched-tokens"
    assert "24866" in ENCODER_LEN_VARIANTS["0.10.2+#24866"].reproduces
    assert ENCODER_LEN_VARIANTS["0.10.2+#24866"].runner == "registry"  # the runner site is #24989's


def test_0_10_2_kv_check_calls_the_registry_per_cross_attention_layer():
    reg = FakeRegistry()
    cfg = VllmConfig(ModelConfig("whisper-tiny", device="cpu"), SchedulerConfig(), CacheConfig(),
                     encoder_len_variant="0.10.2", mm_registry=reg)
    calls = reg.calls
    GPUModelRunner(cfg).determine_num_blocks()
    assert reg.calls - calls == 4 + 1  # 4 decoder layers' CrossAttentionSpec, then the concurrency log


def test_0_10_2_registry_call_hashes_the_float64_clip_through_the_two_copy_join(monkeypatch):
    from refimpl.multimodal import processing
    seen = []
    real = processing.hash_kwargs_by
    def spy(path, **kw):
        seen.append((path, kw["audio"].dtype, kw["audio"].shape))
        return real(path, **kw)
    monkeypatch.setattr(processing, "hash_kwargs_by", spy)
    reg = MultiModalRegistry()
    mc = ModelConfig("whisper-tiny", device="cpu")
    assert reg.get_encdec_max_encoder_len(mc) == 1500
    assert seen == [("v0.9.2", np.float64, (480000,))] and reg.stats.hash_s > 0
    assert reg.cache_bytes() == 0 and reg.stats.encdec_calls == 1
