"""refimpl as an oracle in your tests: scheduler helpers in vLLM's idiom, registries that leave
global state alone, oracles, a reference model of the processing cache and the bad-input table
(docs/testing.md). Public and stable: ``__all__``, the plugin ``refimpl.testing.plugin`` and
``refimpl.testing.strategies`` (needs hypothesis); the rest may change.
"""
from refimpl.core.kv_cache_utils import blocks_for_one_request
from refimpl.engine.core import check_encoder_len
from refimpl.testing.bad_input_kit import REFUSALS, BadInput, Case, Outcome, is_refusal, run_case
from refimpl.testing.bad_input_kit import Kit as BadInputKit
from refimpl.testing.bad_inputs import CASES as BAD_INPUT_CASES
from refimpl.testing.dispatch import SYNC_OPS, DispatchCounter
from refimpl.testing.oracles import (
    CACHE_COUNTERS,
    CACHE_PHASES,
    ENCODER_LEN_ROWS,
    ENCODER_LEN_SITES,
    ROWS,
    WORST_CASES,
    TensorSpec,
    cross_attention_blocks,
    dummy_input_specs,
    dummy_processed_specs,
    encoder_budget,
    encoder_len_sources,
    hf_passes_by_phase,
    max_tokens_per_item,
    processing_cache_by_phase,
)
from refimpl.testing.passes import HFPassCount, count_hf_passes
from refimpl.testing.reference_lru import ReferenceLRU
from refimpl.testing.registry import FakeRegistry, fresh_registry
from refimpl.testing.scheduling import (
    ENCODER_LEN,
    QWEN,
    WHISPER,
    WHISPER_PROMPT,
    FakeModelRunner,
    create_requests,
    create_scheduler,
    create_vllm_config,
    fake_token,
    run_to_completion,
)
from refimpl.variants import LEGACY_NAMES, current_row_name

__all__ = [
    # scheduler helpers (vLLM tests/v1/core/utils.py)
    "WHISPER", "QWEN", "WHISPER_PROMPT", "ENCODER_LEN", "create_vllm_config", "create_scheduler",
    "create_requests", "fake_token", "FakeModelRunner", "run_to_completion",
    # registries
    "fresh_registry", "FakeRegistry",
    # oracles
    "ROWS", "WORST_CASES", "TensorSpec", "max_tokens_per_item", "encoder_budget", "cross_attention_blocks",
    "blocks_for_one_request", "dummy_input_specs", "dummy_processed_specs", "hf_passes_by_phase",
    "processing_cache_by_phase", "CACHE_PHASES", "CACHE_COUNTERS",
    "ENCODER_LEN_ROWS", "ENCODER_LEN_SITES", "encoder_len_sources", "check_encoder_len",
    # HF-processor passes on a registry
    "count_hf_passes", "HFPassCount",
    # row names: the 0.1.0 names (accepted with a DeprecationWarning until 0.3.0)
    "LEGACY_NAMES", "current_row_name",
    # processing-cache reference model
    "ReferenceLRU",
    # ops and host syncs a piece of code dispatches (TorchDispatchMode)
    "DispatchCounter", "SYNC_OPS",
    # bad inputs as data
    "BAD_INPUT_CASES", "Case", "BadInput", "BadInputKit", "Outcome", "run_case", "is_refusal", "REFUSALS",
]
