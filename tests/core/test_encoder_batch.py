"""The ``audios-per-step`` what-if (ours; the bottleneck of vLLM issue #24946): several audios
encoded per step, budget ``max_audios_per_step x 1500``, while cross-attention keeps reading
the per-item encoder length (its own config field, never the batching budget). vLLM's own
answer, PR #29421 in 0.13.0, is the row ``0.13.0``: tests/core/test_cross_attention_sizing.py."""
import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.core.sched.scheduler import Scheduler
from refimpl.testing import FakeModelRunner, FakeRegistry, create_requests, run_to_completion

CROSS = 94  # cdiv(1500, 16)


def _config(n: int, variant: str = "audios-per-step", **sc_kw) -> VllmConfig:
    return VllmConfig(ModelConfig("whisper-tiny", device="cpu"),
                      SchedulerConfig(max_num_seqs=16, max_audios_per_step=n, **sc_kw),
                      CacheConfig(), encoder_len_variant=variant, mm_registry=FakeRegistry())


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
    run_to_completion(s, FakeModelRunner(cross_blocks=CROSS),  # it asserts 94 cross blocks per new request
                      on_step=lambda i, so: per_step.append(len(so.scheduled_encoder_inputs)))
    assert max(per_step) == min(n, 10) and sum(per_step) == 10
