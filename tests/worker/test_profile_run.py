"""GPUModelRunner start-up: profile_run (largest modality, dummy item replicated up to the
encoder budget, vision / audio encoder, text dummy run, peak memory), KV sizing, guards.

The stand-in registry tests run without the multimodal package; the real-registry test runs
Qwen2.5-VL-3B (small scale: real processor, shrunk transformer) once it is importable.
"""

import pytest
import torch

from refimpl.errors import ConfigError, EngineStateError
from refimpl.testing import create_vllm_config
from refimpl.worker.gpu_model_runner import GPUModelRunner
from tests.worker.utils import StandInRegistry, _qwen_config

# an (1, 8, 8) patch grid: 64 patches of 3*2*14*14 values -> 16 tokens after the 2x2 merge
IMAGE = {"pixel_values": torch.rand(64, 1176), "image_grid_thw": torch.tensor([[1, 8, 8]])}


@pytest.mark.parametrize("variant,seq_len,fit,items", [
    ("refimpl", 20000, {"image": 1}, 3),   # sized as the lookup: the per-item maximum (ours)
    ("0.11.0", 20000, None, 3),            # max_model_len (PR #25553)
    ("0.9.0", 256, None, 3)])              # max_num_batched_tokens; cdiv(80, 16) items, capped
def test_profile_run_qwen_stand_in_picks_allowed_modality_and_replicates(variant, seq_len, fit, items):
    reg = StandInRegistry({"image": 16, "video": 64}, {"image": IMAGE})
    runner = GPUModelRunner(_qwen_config(max_num_batched_tokens=256, max_num_seqs=3, max_num_encoder_input_tokens=80,
                                         encoder_cache_size=100), mm_registry=reg)
    runner.load_model()
    peak = runner.profile_run(disable_cache=True, use_formula=True, variant=variant)
    assert peak > 0 and runner.peak_memory_bytes == peak
    assert runner.profile_modality == "image"              # video is larger but limited to 0
    assert runner.profile_mm_items == items                 # min(80 // 16, max_num_seqs * 1)
    assert runner.profile_encoder_tokens == items * 16 and runner.profile_tokens_per_item == 16
    assert runner.max_tokens_per_item == {"image": 16}  # the budget's: enabled modalities only
    assert (runner.encoder_compute_budget, runner.encoder_cache_size) == (80, 100)
    assert reg.calls[0] == ("max_tokens", {"disable_cache": True, "use_formula": True})
    assert reg.calls[1] == ("dummy", {"seq_len": seq_len, "mm_counts": {"image": 1}, "disable_cache": True,
                                      "fit_counts": fit})


def test_profile_run_reuses_the_runners_lookup_from_0_10_1():
    for row, calls in (("0.10.2", ["max_tokens", "dummy"]),
                       ("0.9.0", ["max_tokens", "max_tokens", "dummy"])):  # 0.9.x looked it up again (pass #2)
        reg = StandInRegistry({"image": 16}, {"image": IMAGE})
        runner = GPUModelRunner(_qwen_config(max_num_batched_tokens=256, max_num_seqs=3), mm_registry=reg,
                                variant=row)  # the runner's MultiModalBudget: the lookup at runner init
        assert [c[0] for c in reg.calls] == ["max_tokens"]
        runner.load_model()
        runner.profile_run(variant=row)
        assert [c[0] for c in reg.calls] == calls, row


def test_kv_sizing_refuses_a_cache_that_cannot_hold_one_request():
    cfg = create_vllm_config(block_size=16)
    cfg.cache_config.kv_cache_memory_bytes = 50 * 4 * 2 * 16 * 6 * 64 * 4   # 50 blocks < 94 + 28 + 1
    with pytest.raises(ConfigError):
        GPUModelRunner(cfg).determine_num_blocks()


def test_runner_guards():
    runner = GPUModelRunner(create_vllm_config())
    with pytest.raises(EngineStateError):
        runner.profile_run(disable_cache=False, use_formula=False)
    with pytest.raises(EngineStateError):
        runner.execute_model(None)
    with pytest.raises(NotImplementedError):
        GPUModelRunner(_qwen_config()).execute_model(None)
