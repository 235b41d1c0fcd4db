"""The plugin's fixtures (enabled in pytest.ini) with an engine of the user's own choosing."""
from refimpl.engine.core import EngineCore
from refimpl.multimodal import MULTIMODAL_REGISTRY
from refimpl.testing import hf_passes_by_phase


def test_startup_passes_on_a_private_registry(small_qwen_config, mm_registry, fresh_registry):
    core = EngineCore(small_qwen_config, "0.9.0")
    assert core.report.passes_by_phase == hf_passes_by_phase(small_qwen_config, "0.9.0")
    assert mm_registry.stats.hf_mm_passes == core.report.hf_mm_passes > 0
    assert MULTIMODAL_REGISTRY.stats.hf_mm_passes == 0 and len(MULTIMODAL_REGISTRY.processing_cache) == 0


def test_whisper_config_needs_no_processor(small_whisper_config, mm_registry):
    assert small_whisper_config.scheduler_config.encoder_len_per_item == 1500
    assert mm_registry.stats.hf_processor_calls == 0


def test_real_weights(whisper_tiny_en_engine):  # skipped, saying why, without refimpl[weights]
    assert whisper_tiny_en_engine.vllm_config.model_config.load_format == "ct2"
