"""profile_run on the real registry (Qwen) and on Whisper's stand-in then KV sizing (the fake-registry tests are in tests/worker/test_profile_run.py)."""

import pytest
import torch

from refimpl.testing import create_vllm_config
from refimpl.worker.gpu_model_runner import GPUModelRunner
from tests.worker.utils import StandInRegistry, _qwen_config


@pytest.mark.slow
def test_profile_run_whisper_stand_in_then_kv_sizing():
    reg = StandInRegistry({"audio": 1500}, {"audio": {"input_features": torch.zeros(80, 3000)}})
    cfg = create_vllm_config(max_num_batched_tokens=512, max_num_seqs=8, block_size=16, mm_registry=reg)
    cfg.cache_config.kv_cache_memory_bytes = 32 << 20
    runner = GPUModelRunner(cfg)
    runner.load_model()
    assert runner.profile_run(disable_cache=False, use_formula=False) > 0
    assert (runner.encoder_compute_budget, runner.encoder_cache_size) == (1500, 1500)  # the config's, one audio
    assert runner.profile_modality == "audio" and runner.profile_mm_items == 1
    assert runner.profile_encoder_tokens == 1500
    # KV: 4 layers * 2 * 16 tokens * 6 heads * 64 dims * 4 bytes
    assert runner.bytes_per_block() == 4 * 2 * 16 * 6 * 64 * 4
    n = runner.determine_num_blocks()
    assert n == (32 << 20) // runner.bytes_per_block()
    runner.initialize_kv_cache(n)
    assert len(runner.kv_caches) == 4 and runner.kv_caches[0].shape == (2, n, 16, 6, 64)
    assert runner.capture_model() == 0                      # eager on CPU


@pytest.mark.slow
def test_profile_run_qwen_real_registry():
    mm = pytest.importorskip("refimpl.multimodal.registry")
    cfg = _qwen_config(max_num_batched_tokens=8192, max_num_seqs=4)
    runner = GPUModelRunner(cfg)
    runner.load_model()
    try:
        peak = runner.profile_run(disable_cache=False, use_formula=True)
    finally:
        mm.MULTIMODAL_REGISTRY.reset_processor_cache()
    assert peak > 0 and runner.profile_modality == "image"
    assert runner.max_tokens_per_item["image"] == 16384       # 3584 x 3584 under max_pixels
    assert runner.profile_encoder_tokens == runner.profile_mm_items * 16384
