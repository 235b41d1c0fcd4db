"""The encoder-length rows: where each call site reads Whisper's encoder length, and the budget.

The second table of the study's rows (refimpl.variants holds the start-up rows and re-exports every
name here): a release row (``"0.10.2"``) reads the length as that release did at each call site, a
one-change row (``"0.10.2+#24866"``) adds one PR, ``audios-per-step`` is ours. Raises
UnknownVariantError naming the choices for an unknown name.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, Optional

from refimpl.errors import UnknownVariantError
from refimpl.variant_names import LEGACY_NAMES, current_row_name

# Where the Whisper encoder length (1500 tokens) is read, as in vLLM 0.10.2:
#   metadata  - CrossAttentionBuilder.build, every forward step        (PR #24866)
#   runner    - model runner init (0.13.0: its block-table width)      (PR #24989)
#   scheduler - Scheduler.schedule(), each admission attempt           (PR #24989)
#   kv_cache  - CrossAttentionSpec's KV memory check, start-up         (PR #24989)
EncoderLenSite = Literal["metadata", "runner", "scheduler", "kv_cache"]
ENCODER_LEN_SITES: tuple[EncoderLenSite, ...] = ("metadata", "runner", "scheduler", "kv_cache")
# "registry": MULTIMODAL_REGISTRY.get_encdec_max_encoder_len(model_config), uncached;
# "config":   scheduler_config.max_num_encoder_input_tokens: the encoder length while
#             VllmConfig overrides it (0.10.2 to 0.12), the batching budget from 0.13.0;
# "per-item": scheduler_config.encoder_len_per_item, one audio's length computed once
#             (0.13.0's metadata: the scheduled lengths; 0.14.0's scheduler: one registry call).
EncoderLenSource = Literal["registry", "config", "per-item"]


@dataclass(frozen=True)
class EncoderLenVariant:
    """Where each call site reads the Whisper encoder length, and the encoder budget:
    encoder-len (one audio per step, 0.10.2 to 0.12), batched-tokens (#29421, 0.13.0:
    ``max_num_batched_tokens``), audios-per-step (ours: ``max_audios_per_step`` lengths)."""
    name: str
    reproduces: str
    release: Optional[str]
    metadata: EncoderLenSource
    runner: EncoderLenSource
    scheduler: EncoderLenSource
    kv_cache: EncoderLenSource
    encoder_budget: Literal["encoder-len", "batched-tokens", "audios-per-step"] = "encoder-len"

    @property
    def encoder_batch(self) -> bool:
        """The audios-per-step what-if (``max_audios_per_step`` sets the budget)."""
        return self.encoder_budget == "audios-per-step"

    def source(self, site: EncoderLenSite) -> EncoderLenSource:
        """Where ``site`` reads the encoder length. Raises KeyError for an unknown site."""
        if site not in ENCODER_LEN_SITES:
            raise KeyError(f"unknown encoder-length call site {site!r}; one of {ENCODER_LEN_SITES}")
        return getattr(self, site)


_E0102 = EncoderLenVariant("0.10.2", "vLLM 0.10.2 (every site calls the registry)", "0.10.2",
                           metadata="registry", runner="registry", scheduler="registry",
                           kv_cache="registry")
_E0110 = EncoderLenVariant("0.11.0", "vLLM 0.11.0 (PRs #24866 and #24989: every site reads the "
                           "config)", "0.11.0", metadata="config", runner="config",
                           scheduler="config", kv_cache="config")
_E0130 = replace(_E0110, name="0.13.0", release="0.13.0", metadata="per-item",
                 encoder_budget="batched-tokens",
                 reproduces="vLLM 0.13.0 (PR #29421: the budget follows max_num_batched_tokens; "
                 "the scheduler, runner and KV check size cross-attention from it)")
ENCODER_LEN_VARIANTS: dict[str, EncoderLenVariant] = {v.name: v for v in (
    _E0102,
    replace(_E0102, name="0.10.2+#24866", release=None, metadata="config",
            reproduces="vLLM 0.10.2 + PR #24866 (the metadata builder reads the config)"),
    replace(_E0102, name="0.10.2+#24989", release=None, runner="config", scheduler="config",
            kv_cache="config", reproduces="vLLM 0.10.2 + PR #24989 (scheduler, runner and KV "
            "check read the config)"),
    _E0110, _E0130,
    replace(_E0130, name="0.14.0", release="0.14.0", scheduler="per-item",
            reproduces="vLLM 0.14.0 (the scheduler's length from one registry call; the "
            "runner's block-table width and the KV check still read the budget)"),
    EncoderLenVariant("audios-per-step", "ours, a what-if: the per-item length at every site, "
                      "a budget of max_audios_per_step audios", None, metadata="per-item",
                      runner="per-item", scheduler="per-item", kv_cache="per-item",
                      encoder_budget="audios-per-step"),
)}


def get_encoder_len_variant(name: str) -> EncoderLenVariant:
    """The record named ``name`` (an old name: its row, with a DeprecationWarning). Raises
    UnknownVariantError naming the choices."""
    if name not in ENCODER_LEN_VARIANTS and name.partition("@")[0] in LEGACY_NAMES:
        name = current_row_name(name, stacklevel=3)
    if name not in ENCODER_LEN_VARIANTS:
        raise UnknownVariantError("encoder_len_variant", tuple(ENCODER_LEN_VARIANTS),
                                  f"unknown variant {name!r}")
    return ENCODER_LEN_VARIANTS[name]
