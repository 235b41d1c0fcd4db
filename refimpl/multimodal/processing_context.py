"""What a multimodal processor knows of its model, and the HF processor call itself.

Mirrors ``BaseProcessingInfo`` and ``InputProcessingContext.call_hf_processor`` of
``vllm/multimodal/processing/context.py`` (in ``vllm/multimodal/processing.py`` up to 0.11): the
model's facts and settings (a call's own ``mm_processor_kwargs`` merged over the model-level ones),
and one HF call whose errors become the input's fault. refimpl.multimodal.processing re-exports
``BaseProcessingInfo``.
"""
from __future__ import annotations

import copy
from typing import Any

from refimpl.config import get_config_dict, get_preprocessor_dict
from refimpl.config.checks import check_mm_processor_kwargs
from refimpl.errors import ConfigError, InvalidInputError

# transformers >= 5.23 (ProcessorMixin.validate_inputs): placeholders and items differ in number
_HF_PLACEHOLDER_COUNT = ("tokens in the text but no", "tokens in the prompts should be the same as")


class BaseProcessingInfo:
    """Per-model facts the processor and dummy builder need (vLLM ``BaseProcessingInfo``). The HF
    processor is cached per model and ``mm_processor_kwargs``; ``switches`` overrides
    ``model_config.mm_switches``; ``call_kwargs``: one call's own ``mm_processor_kwargs``
    (``BaseMultiModalProcessor.for_call``), over the model-level ones."""
    modalities: tuple[str, ...] = ()

    def __init__(self, model_config, switches=None):
        self.model_config = model_config
        self.model_id: str = model_config.model
        self._switches = switches
        self.call_kwargs: dict[str, Any] = {}

    @property
    def mm_processor_kwargs(self) -> dict[str, Any]:
        """The model-level ``mm_processor_kwargs`` with this call's merged over them."""
        return dict(self.model_config.mm_processor_kwargs) | self.call_kwargs

    @property
    def hf_config(self) -> dict[str, Any]:
        return get_config_dict(self.model_id)  # processing always uses the real model's sizes

    @property
    def switches(self):
        """The MultiModalSwitches (vLLM-version mechanics) this processor follows."""
        return self._switches or self.model_config.mm_switches

    def get_hf_processor(self):
        raise NotImplementedError

    def get_tokenizer(self):
        from refimpl.tokenizer import get_tokenizer  # transformers' tokenizers: not for the dry plan

        return get_tokenizer(self.model_id)

    def get_allowed_mm_limits(self) -> dict[str, int]:
        return {m: self.model_config.get_mm_limit(m) for m in self.modalities}

    def get_max_tokens_per_item(self, seq_len: int, mm_counts: dict[str, int]) -> dict[str, int]:
        """Max tokens of one item per modality by formula, no processing (vLLM PR #19756)."""
        raise NotImplementedError

    def for_call(self, call_kwargs: dict[str, Any]) -> "BaseProcessingInfo":
        """A copy whose ``call_kwargs`` are ``call_kwargs`` (a non-empty dict), checked merged over the
        model-level ones by the same rules (``check_mm_processor_kwargs``) and with its HF processor
        built from them. Raises InvalidInputError: ``mm_processor_kwargs`` (an unknown key, a
        combination the HF processor refuses) or ``mm_processor_kwargs.<key>`` (a value out of range)."""
        try:
            check_mm_processor_kwargs(self.model_id, self.mm_processor_kwargs | call_kwargs,
                                      get_preprocessor_dict(self.model_id))
        except ConfigError as e:
            fld = e.field if e.field == "mm_processor_kwargs" else f"mm_processor_kwargs.{e.field}"
            raise InvalidInputError(fld, e.limit, e.message) from None
        info = copy.copy(self)
        info.call_kwargs = call_kwargs
        try:
            info.get_hf_processor()
        except Exception as e:  # a combination the HF processor's constructor refuses
            raise InvalidInputError("mm_processor_kwargs", "values the HF processor accepts",
                                    f"{call_kwargs}: {type(e).__name__}: {e}") from None
        return info


def call_hf_processor(hf, inputs: dict[str, Any], kw: dict[str, Any], call_kwargs: dict[str, Any]):
    """``hf(**inputs, return_tensors="pt", **kw)``. Only the HF call's own errors are the input's
    fault; refimpl's propagate. Raises InvalidInputError: "prompt" (placeholders and items differ
    in number), "mm_processor_kwargs" (the HF processor refuses a call's ``call_kwargs``) or
    "mm_data" (it refuses the items)."""
    try:
        return hf(**inputs, return_tensors="pt", **kw)
    except (ValueError, TypeError, RuntimeError) as e:
        if any(s in str(e) for s in _HF_PLACEHOLDER_COUNT):  # transformers >= 5.23 checks the counts
            raise InvalidInputError("prompt", "one placeholder per item", str(e)) from None
        if call_kwargs:  # e.g. do_resize=False on a size that is not whole patches
            raise InvalidInputError("mm_processor_kwargs", "values the HF processor accepts",
                                    f"{call_kwargs}: {e}") from e
        raise InvalidInputError("mm_data", "input the HF processor accepts", str(e)) from e
    except (IndexError, StopIteration) as e:
        # transformers' Qwen2.5-VL processor runs out of grids (StopIteration) when the
        # text has more placeholders than items: a bad prompt, not a crash.
        raise InvalidInputError("prompt", "one placeholder per item",
                                f"the HF processor could not match placeholders to items "
                                f"({type(e).__name__}: {e})") from None
