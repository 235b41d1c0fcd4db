"""A config field that disagrees with the encoder refuses to start (the batch sizes are in tests/core/test_encoder_batch.py)."""
import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.errors import ConfigError, EncoderLengthMismatchError
from refimpl.testing import FakeRegistry


def _config(n: int, variant: str = "audios-per-step", **sc_kw) -> VllmConfig:
    return VllmConfig(ModelConfig("whisper-tiny", device="cpu"),
                      SchedulerConfig(max_num_seqs=16, max_audios_per_step=n, **sc_kw),
                      CacheConfig(), encoder_len_variant=variant, mm_registry=FakeRegistry())


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
