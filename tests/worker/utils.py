"""A stand-in registry and a small Qwen config for profile_run (tests/worker/test_profile_run.py, tests/worker/test_profile_run_real.py)."""
from types import SimpleNamespace

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.multimodal import MultiModalRegistry


class StandInRegistry(MultiModalRegistry):
    """Max tokens per item and one small decoder dummy item; records the keyword arguments. Processors
    (the sizes the MultiModalBudget reads) are the real registry's."""

    def __init__(self, max_tokens, items):
        super().__init__(0)
        self.max_tokens, self.items, self.calls = max_tokens, items, []

    def get_max_tokens_per_item_by_modality(self, model_config, **kw):
        self.calls.append(("max_tokens", kw))
        return dict(self.max_tokens)

    def get_decoder_dummy_data(self, model_config, seq_len, mm_counts, **kw):
        self.calls.append(("dummy", dict(seq_len=seq_len, mm_counts=mm_counts, **kw)))
        (m,) = mm_counts
        return SimpleNamespace(prompt_token_ids=[0] * seq_len, multi_modal_data={m: [self.items[m]]})

    def get_encdec_max_encoder_len(self, model_config):
        return model_config.max_encoder_len


def _qwen_config(**sched):
    return VllmConfig(ModelConfig("qwen2.5-vl-3b", device="cpu", scale="small", max_model_len=20000,
                                  limit_mm_per_prompt={"video": 0}),
                      SchedulerConfig(**sched), CacheConfig(kv_cache_memory_bytes=64 << 20))
