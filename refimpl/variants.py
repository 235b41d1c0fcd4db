"""The study's switches in one table: each variant a named record of what it reproduces.

Start-up variants (vLLM PR #17935, Qwen2.5-VL) are read by ``EngineCore`` and the start-up
and budget benchmarks; encoder-length variants (vLLM PRs #24866 / #24989, Whisper) by
``VllmConfig.get_encoder_len`` at the four call sites of ``EncoderLenSite``. To add a variant,
add a record to the tuple below (and a field with a default for a new switch); every bench,
notebook and test reads these dicts. See docs/background.md for the mechanisms.

Raises UnknownVariantError (naming the choices) from ``get_startup_variant`` /
``get_encoder_len_variant`` for an unknown name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from refimpl.errors import UnknownVariantError

# Where the Whisper encoder length (1500 tokens) is read, as in vLLM 0.10.2:
#   metadata  - CrossAttentionBuilder.build, every forward step        (fixed by PR #24866)
#   runner    - model runner init / encoder sequence lengths           (PR #24989)
#   scheduler - Scheduler.schedule(), each admission attempt           (PR #24989)
#   kv_cache  - KV-cache memory check / cross-attention spec, start-up (PR #24989)
EncoderLenSite = Literal["metadata", "runner", "scheduler", "kv_cache"]
ENCODER_LEN_SITES: tuple[EncoderLenSite, ...] = ("metadata", "runner", "scheduler", "kv_cache")
# "registry": MULTIMODAL_REGISTRY.get_encdec_max_encoder_len(model_config), uncached;
# "config":   scheduler_config.max_num_encoder_input_tokens, computed once in __post_init__;
# "per-item": scheduler_config.encoder_len_per_item, the per-audio length kept apart from the
#             batching budget (PR #29421's budget is N audios, no longer one encoder length).
EncoderLenSource = Literal["registry", "config", "per-item"]


@dataclass(frozen=True)
class MultiModalSwitches:
    """Which vLLM version's multimodal start-up mechanics to reproduce (defaults: later vLLM).

    ``dummy_video_dtype``: "int64" is vLLM <= 0.11.0's ``np.full(shape, 255)`` (8 bytes a
    pixel channel); "uint8" from vLLM 0.11.1. ``hash_byte_path``: one of
    refimpl.multimodal.hasher.BYTE_PATHS ("v0.9.0": 3 full copies of an array per hash,
    "v0.9.2": 2, PR #19484; "stream": none, PR #24925). ``oversize_item``: "raise" (vLLM
    0.9.0, issue #52835) or "skip" (PR #53016) for an item larger than the processing cache.
    ``shape_only`` (ours, beyond vLLM): start-up builds the profile run's encoder inputs at
    their processed shape without any HF-processor pass. Raises UnknownVariantError (a
    ConfigError) on a bad value.
    """
    dummy_video_dtype: Literal["int64", "uint8"] = "uint8"
    hash_byte_path: Literal["v0.9.0", "v0.9.2", "stream"] = "stream"
    oversize_item: Literal["raise", "skip"] = "skip"
    shape_only: bool = False

    def __post_init__(self):
        for name, allowed in (("dummy_video_dtype", ("int64", "uint8")),
                              ("hash_byte_path", ("v0.9.0", "v0.9.2", "stream")),
                              ("oversize_item", ("raise", "skip"))):
            if getattr(self, name) not in allowed:
                raise UnknownVariantError(f"mm_switches.{name}", allowed, f"got {getattr(self, name)!r}")


@dataclass(frozen=True)
class StartupVariant:
    """One start-up behaviour of the multimodal engine.

    ``cache_during_profiling``: the profiling passes (encoder budget, max-token lookups, dummy
    encoder input) go through the processing cache; ``max_tokens_by_formula``: max tokens per
    item from the model's formula instead of processing a dummy item; ``reset_at_end``:
    ``EngineCore.reset_mm_cache()`` at the end of start-up. ``dummy_video_dtype``,
    ``hash_byte_path``, ``oversize_item``, ``shape_only``: the multimodal mechanics of that
    version, handed to the processor as ``ModelConfig.mm_switches`` (see MultiModalSwitches).
    """
    name: str
    reproduces: str
    cache_during_profiling: bool
    max_tokens_by_formula: bool
    reset_at_end: bool
    dummy_video_dtype: Literal["int64", "uint8"] = "uint8"
    hash_byte_path: Literal["v0.9.0", "v0.9.2", "stream"] = "stream"
    oversize_item: Literal["raise", "skip"] = "skip"
    shape_only: bool = False

    @property
    def mm_switches(self) -> MultiModalSwitches:
        return MultiModalSwitches(self.dummy_video_dtype, self.hash_byte_path, self.oversize_item,
                                  self.shape_only)


@dataclass(frozen=True)
class EncoderLenVariant:
    """Where each call site reads the Whisper encoder length (one ``EncoderLenSource`` per site).

    ``encoder_batch``: the encoder compute budget is ``scheduler_config.max_audios_per_step``
    audios of ``encoder_len_per_item`` tokens (PR #29421) instead of one encoder length, so
    several audios are encoded in one step; the other variants refuse max_audios_per_step > 1.
    """
    name: str
    reproduces: str
    metadata: EncoderLenSource
    runner: EncoderLenSource
    scheduler: EncoderLenSource
    kv_cache: EncoderLenSource
    encoder_batch: bool = False

    def source(self, site: EncoderLenSite) -> EncoderLenSource:
        """Where ``site`` reads the encoder length: 'registry', 'config' or 'per-item' (see
        ``EncoderLenSource``). Raises KeyError for an unknown site."""
        if site not in ENCODER_LEN_SITES:
            raise KeyError(f"unknown encoder-length call site {site!r}; one of {ENCODER_LEN_SITES}")
        return getattr(self, site)


# Ladder order: 0.8.5 -> 0.9.0 -> later fixes -> formula -> shape-only. 0.8.5 and 0.9.0 share
# 0.9.0's mechanics (np.full's int64 dummy video, 3 copies per hash, "value too large"); each
# later-fix row changes one mechanic (read from the released wheels' hasher.py / profiling.py).
STARTUP_VARIANTS: dict[str, StartupVariant] = {v.name: v for v in (
    StartupVariant("no-cache", "vLLM 0.8.5 (before PR #17935)",
                   cache_during_profiling=False, max_tokens_by_formula=False, reset_at_end=False,
                   dummy_video_dtype="int64", hash_byte_path="v0.9.0", oversize_item="raise"),
    StartupVariant("cache-reset", "vLLM 0.9.0 (PR #17935)",
                   cache_during_profiling=True, max_tokens_by_formula=False, reset_at_end=True,
                   dummy_video_dtype="int64", hash_byte_path="v0.9.0", oversize_item="raise"),
    StartupVariant("hash-nocopy", "vLLM 0.9.2 (PR #19484: the hasher no longer copies arrays with tobytes)",
                   cache_during_profiling=True, max_tokens_by_formula=False, reset_at_end=True,
                   dummy_video_dtype="int64", hash_byte_path="v0.9.2", oversize_item="raise"),
    StartupVariant("hash-stream", "vLLM 0.11.0 (PR #24925: the hasher streams buffers, no copy)",
                   cache_during_profiling=True, max_tokens_by_formula=False, reset_at_end=True,
                   dummy_video_dtype="int64", hash_byte_path="stream", oversize_item="raise"),
    StartupVariant("uint8-video", "vLLM 0.11.1 (uint8 dummy video)",
                   cache_during_profiling=True, max_tokens_by_formula=False, reset_at_end=True,
                   dummy_video_dtype="uint8", hash_byte_path="stream", oversize_item="raise"),
    StartupVariant("formula", "PR #19756 (max tokens per item by formula), on the later fixes",
                   cache_during_profiling=True, max_tokens_by_formula=True, reset_at_end=True),
    StartupVariant("shape-only", "ours: profile-run inputs built at their processed shape, no HF pass",
                   cache_during_profiling=True, max_tokens_by_formula=True, reset_at_end=True,
                   shape_only=True),
)}

ENCODER_LEN_VARIANTS: dict[str, EncoderLenVariant] = {v.name: v for v in (
    EncoderLenVariant("registry", "vLLM 0.10.2",
                      metadata="registry", runner="registry", scheduler="registry",
                      kv_cache="registry"),
    EncoderLenVariant("runner-config", "PR #24866",
                      metadata="config", runner="config", scheduler="registry",
                      kv_cache="registry"),
    EncoderLenVariant("scheduler-config", "PR #24989",
                      metadata="config", runner="config", scheduler="config", kv_cache="config"),
    EncoderLenVariant("encoder-batch", "PR #29421 (issue #24946: several audios encoded per step)",
                      metadata="per-item", runner="per-item", scheduler="per-item",
                      kv_cache="per-item", encoder_batch=True),
)}


def get_startup_variant(name: str) -> StartupVariant:
    """The record named ``name``. Raises UnknownVariantError naming the choices."""
    if name not in STARTUP_VARIANTS:
        raise UnknownVariantError("variant", tuple(STARTUP_VARIANTS), f"unknown variant {name!r}")
    return STARTUP_VARIANTS[name]


def get_encoder_len_variant(name: str) -> EncoderLenVariant:
    """The record named ``name``. Raises UnknownVariantError naming the choices."""
    if name not in ENCODER_LEN_VARIANTS:
        raise UnknownVariantError("encoder_len_variant", tuple(ENCODER_LEN_VARIANTS),
                                  f"unknown variant {name!r}")
    return ENCODER_LEN_VARIANTS[name]
