"""The ``audios-per-step`` what-if (ours; the bottleneck of vLLM issue #24946): several audios
encoded per step, budget ``max_audios_per_step x 1500``, while cross-attention keeps reading
the per-item encoder length (its own config field, never the batching budget). vLLM's own
answer, PR #29421 in 0.13.0, is the row ``0.13.0``: tests/test_cross_attention_sizing.py."""
import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.core.sched.scheduler import Scheduler
from refimpl.errors import ConfigError, EncoderLengthMismatchError
from utils import FakeModelRunner, create_requests, patch_registry, run_to_completion

CROSS = 94  # cdiv(1500, 16)


def _config(n: int, variant: str = "audios-per-step", **sc_kw) -> VllmConfig:
    with patch_registry():
        return VllmConfig(ModelConfig("whisper-tiny", device="cpu"),
                          SchedulerConfig(max_num_seqs=16, max_audios_per_step=n, **sc_kw),
                          CacheConfig(), encoder_len_variant=variant)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_n_audios_per_step_and_94_cross_blocks_whatever_n(n):
    cfg = _config(n)
    sc = cfg.scheduler_config
    assert (sc.max_num_encoder_input_tokens, sc.encoder_len_per_item) == (1500 * n, 1500)
    assert cfg.get_encoder_len("scheduler") == cfg.get_encoder_len("kv_cache") == 1500
    s = Scheduler(cfg, 10000, encoder_compute_budget=sc.max_num_encoder_input_tokens,
                  encoder_cache_size=sc.encoder_cache_size)
    for r in create_requests(10, max_tokens=3):
        s.add_request(r)
    per_step = []
    with patch_registry():  # FakeModelRunner asserts 94 cross blocks per new request
        run_to_completion(s, FakeModelRunner(cross_blocks=CROSS),
                          on_step=lambda i, so: per_step.append(len(so.scheduled_encoder_inputs)))
    assert max(per_step) == min(n, 10) and sum(per_step) == 10


def test_config_field_disagreeing_with_the_encoder_refuses_to_start():
    from refimpl.engine.core import EngineCore
    with pytest.raises(EncoderLengthMismatchError) as ei:
        _config(4, encoder_len_per_item=1024)
    assert ei.value.field == "scheduler_config.encoder_len_per_item" and ei.value.limit == 1500
    cfg = _config(4)
    cfg.scheduler_config.encoder_len_per_item = 8192  # changed after the config was built
    with pytest.raises(EncoderLengthMismatchError, match="encoder_len_per_item"):
        EngineCore(cfg)
    with pytest.raises(ConfigError, match="max_audios_per_step"):
        _config(2, variant="0.11.0")

# Tokens identical to 0.11.0 (real weights, stopping at EOS): see
# tests/test_real_weights.py::test_engine_equals_generate_on_real_weights_stopping_at_eos.
