"""vLLM-level multimodal processor: HF processing with and without the processing cache.

Mirrors ``BaseMultiModalProcessor`` / ``EncDecMultiModalProcessor`` of
``vllm/multimodal/processing.py`` (0.9.0). Cached: hash each item, HF-process the misses alone,
store per item, tokenize the prompt and expand placeholders; uncached: one HF call; both give
identical outputs. Left out: text-level prompt updates, ``PromptInsertion``, ``is_embed``,
embedding inputs, tokenization kwargs.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import torch

from refimpl.config import get_config_dict
from refimpl.errors import InvalidInputError
from refimpl.multimodal.cache import MultiModalHasher, ProcessingCache
from refimpl.multimodal.hasher import hash_kwargs_by
from refimpl.multimodal.inputs import MultiModalInputs, parse_mm_data, split_hf_outputs
from refimpl.multimodal.prompt_updates import (
    Updates,
    apply_token_matches,
    check_unused_placeholders,
    find_mm_placeholders,
)
from refimpl.tokenizer import get_tokenizer

Items = dict[str, list[Any]]                      # modality -> raw items
KwItems = dict[str, list[dict[str, torch.Tensor]]]  # modality -> per-item tensors
# transformers >= 5.23 (ProcessorMixin.validate_inputs): placeholders and items differ in number
_HF_PLACEHOLDER_COUNT = ("tokens in the text but no", "tokens in the prompts should be the same as")


class BaseProcessingInfo:
    """Per-model facts the processor and dummy builder need (vLLM ``BaseProcessingInfo``). The HF
    processor is cached per model and ``mm_processor_kwargs``; ``switches`` overrides
    ``model_config.mm_switches``."""
    modalities: tuple[str, ...] = ()

    def __init__(self, model_config, switches=None):
        self.model_config = model_config
        self.model_id: str = model_config.model
        self._switches = switches

    @property
    def mm_processor_kwargs(self) -> dict[str, Any]:
        return dict(self.model_config.mm_processor_kwargs)

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
        return get_tokenizer(self.model_id)

    def get_allowed_mm_limits(self) -> dict[str, int]:
        return {m: self.model_config.get_mm_limit(m) for m in self.modalities}

    def get_max_tokens_per_item(self, seq_len: int, mm_counts: dict[str, int]) -> dict[str, int]:
        """Max tokens of one item per modality by formula, no processing (vLLM PR #19756)."""
        raise NotImplementedError


class BaseMultiModalProcessor:
    """Turns (prompt, items) into MultiModalInputs; cheap to build. ``cache`` None: caching off."""

    hf_applies_updates = True  # the HF processor expands placeholder tokens itself
    # A placeholder token left unexpanded (more placeholders than items) is refused; vLLM
    # lets it through and fails later in the model's embedding merge.
    check_unused_placeholders = True

    def __init__(self, info, dummy_inputs, *, cache: Optional[ProcessingCache], stats):
        self.info, self.dummy_inputs, self.cache, self.stats = info, dummy_inputs, cache, stats

    # -- model-specific hooks ------------------------------------------------------------
    def _get_hf_inputs(self, hf, text: str, items: Items) -> dict[str, Any]:
        """Keyword arguments of the HF processor call for ``text`` and ``items``."""
        raise NotImplementedError

    def _postprocess_hf_outputs(self, out) -> dict[str, torch.Tensor]:
        """The HF output keyed as ``_get_mm_fields_config`` and ``input_ids`` expect."""
        return out

    def _get_mm_fields_config(self) -> dict[str, tuple[str, Optional[str]]]:
        """field -> (modality, sizes_field), as ``split_hf_outputs`` takes it."""
        raise NotImplementedError

    def _get_prompt_updates(self, mm_kwargs: KwItems) -> Updates:
        raise NotImplementedError

    # -- HF calls ------------------------------------------------------------------------
    @contextmanager
    def _hf_pass(self, items: Items) -> Iterator[None]:
        """Count and time one HF processor pass (``items`` empty: a text-only pass)."""
        self.stats.count_hf_pass(bool(items))
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t0
            self.stats.hf_processor_s += dt
            if not items:
                self.stats.hf_text_only_s += dt

    def _call_hf_processor(self, text: str, items: Items, kw: dict) -> dict[str, torch.Tensor]:
        with self._hf_pass(items):
            hf = self.info.get_hf_processor()
            inputs = self._get_hf_inputs(hf, text, items)
            # Only the HF call's own errors are the input's fault; refimpl's propagate.
            try:
                out = hf(**inputs, return_tensors="pt", **kw)
            except (ValueError, TypeError) as e:
                if any(s in str(e) for s in _HF_PLACEHOLDER_COUNT):  # transformers >= 5.23 checks the counts
                    raise InvalidInputError("prompt", "one placeholder per item", str(e)) from None
                raise InvalidInputError("mm_data", "input the HF processor accepts", str(e)) from e
            except (IndexError, StopIteration) as e:
                # transformers' Qwen2.5-VL processor runs out of grids (StopIteration) when the
                # text has more placeholders than items: a bad prompt, not a crash.
                raise InvalidInputError("prompt", "one placeholder per item",
                                        f"the HF processor could not match placeholders to items "
                                        f"({type(e).__name__}: {e})") from None
            return self._postprocess_hf_outputs(out)

    def _split(self, out: dict[str, torch.Tensor], counts: dict[str, int]) -> KwItems:
        """Cut the HF processor's batched output into one dict of tensors per item."""
        t0 = time.perf_counter()
        try:
            return split_hf_outputs(out, self._get_mm_fields_config(), counts)
        finally:
            self.stats.split_s += time.perf_counter() - t0

    def _apply_hf_processor_text_mm(self, text: str, items: Items, kw: dict):
        out = self._call_hf_processor(text, items, kw)
        ids = out["input_ids"]
        ids = ids[0].tolist() if isinstance(ids, torch.Tensor) else list(ids[0])
        return ids, self._split(out, {m: len(v) for m, v in items.items()}), self.hf_applies_updates

    def _apply_hf_processor_text_only(self, text: str) -> list[int]:
        """The prompt's token ids without its items: one text-only HF pass, counted and timed as
        the release's ``hf(text=...)`` call was. The HF processor's own tokenizer does it, as the
        HF processor does for text alone and as vLLM >= 0.31's renderer tokenizes the prompt:
        transformers >= 5.23 refuses a processor call whose text holds placeholders but no items."""
        with self._hf_pass({}):
            return list(self.info.get_hf_processor().tokenizer(text)["input_ids"])

    def _apply_hf_processor_mm_only(self, items: Items, kw: dict) -> KwItems:
        counts = {m: len(v) for m, v in items.items()}
        return self._apply_hf_processor_text_mm(self.dummy_inputs.get_dummy_text(counts), items, kw)[1]

    def _apply_hf_processor_main(self, prompt, items: Items, kw: dict, *, enable_hf_prompt_update: bool):
        if isinstance(prompt, str):
            if enable_hf_prompt_update:
                return self._apply_hf_processor_text_mm(prompt, items, kw)
            prompt_ids = self._apply_hf_processor_text_only(prompt)
        else:
            prompt_ids = list(prompt)
        return prompt_ids, self._apply_hf_processor_mm_only(items, kw), False

    def _hash(self, modality: str, item: Any, kw: dict) -> str:
        t0 = time.perf_counter()
        try:
            return self._hash_item(modality, item, kw)
        finally:
            self.stats.hash_s += time.perf_counter() - t0

    def _hash_item(self, modality: str, item: Any, kw: dict) -> str:
        # Model-level mm_processor_kwargs change the output too, so they are keyed with the
        # call's kwargs (vLLM merges them before calling the HF processor).
        kw = self.info.mm_processor_kwargs | kw
        path = self.info.switches.hash_byte_path
        if path != "stream":  # vLLM 0.8.5-0.10.2: model_id, {modality: item}, kwargs, with copies
            return hash_kwargs_by(path, model_id=self.info.model_id, **{modality: item}, **kw)
        return MultiModalHasher.hash_kwargs(model_id=self.info.model_id, modality=modality, item=item, **kw)

    def _cached_apply_hf_processor(self, prompt, items: Items, kw: dict, return_mm_hashes: bool):
        if self.cache is None:  # hashed when asked to, or always from vLLM 0.10.2 (hash_uncached)
            hashes = ({m: [self._hash(m, x, kw) for x in xs] for m, xs in items.items()}
                      if return_mm_hashes or self.info.switches.hash_uncached else {})
            ids, mm_kwargs, applied = self._apply_hf_processor_main(prompt, items, kw, enable_hf_prompt_update=True)
            return ids, mm_kwargs, hashes, applied
        hashes = {m: [self._hash(m, x, kw) for x in xs] for m, xs in items.items()}
        found = {m: [self.cache.get(h) for h in hs] for m, hs in hashes.items()}
        for vs in found.values():
            hit = sum(v is not None for v in vs)
            self.stats.cache_hits += hit
            self.stats.cache_misses += len(vs) - hit
        missing = {m: [items[m][i] for i, v in enumerate(vs) if v is None] for m, vs in found.items()}
        missing = {m: xs for m, xs in missing.items() if xs}
        # The prompt does not match the missing items, so updates are applied by us afterwards.
        ids, new_kwargs, applied = self._apply_hf_processor_main(prompt, missing, kw, enable_hf_prompt_update=False)
        merged: KwItems = {}
        for m, vs in found.items():
            it = iter(new_kwargs.get(m, []))
            merged[m] = []
            for h, v in zip(hashes[m], vs):
                if v is None:
                    v = next(it)
                    self.cache.put(h, v, oversize=self.info.switches.oversize_item)
                merged[m].append(v)
        return ids, merged, hashes, applied

    def apply(self, prompt: str | list[int], mm_data: Optional[dict[str, Any]],
              hf_processor_mm_kwargs: Optional[dict[str, Any]] = None, *,
              return_mm_hashes: bool = False) -> MultiModalInputs:
        """Process one prompt and its items (``mm_data``: ``{modality: item | [items]}``).

        ``mm_hashes`` is filled when the cache is on or ``return_mm_hashes`` asks. Raises
        InvalidInputError / TooManyItemsError; the processor and the cache stay usable."""
        kw = dict(hf_processor_mm_kwargs or {})
        items = parse_mm_data(mm_data, self.info.get_allowed_mm_limits(),
                              keep_float64=self.info.switches.dummy_audio_dtype == "float64",
                              background=self.info.model_config.rgba_background_color)
        counts = {m: len(v) for m, v in items.items()}
        ids, mm_kwargs, hashes, applied = self._cached_apply_hf_processor(prompt, items, kw,
                                                                          return_mm_hashes)
        updates = self._get_prompt_updates(mm_kwargs)
        fn = find_mm_placeholders if applied else apply_token_matches
        ids, placeholders = fn(ids, updates, counts)
        if self.check_unused_placeholders:
            check_unused_placeholders(ids, updates, placeholders, counts)
        return MultiModalInputs(prompt_token_ids=ids, mm_kwargs=mm_kwargs, mm_hashes=hashes,
                                mm_placeholders=placeholders)


class EncDecMultiModalProcessor(BaseMultiModalProcessor):
    """Encoder-decoder: the items go with the model's encoder prompt (Whisper: ``[0]`` -> 1500
    zeros); the user's prompt becomes the decoder prompt, without special tokens."""

    check_unused_placeholders = False  # the encoder prompt is the model's own, not the user's

    def create_encoder_prompt(self, prompt, mm_data) -> str | list[int]:
        raise NotImplementedError

    def apply(self, prompt, mm_data, hf_processor_mm_kwargs=None, *,
              return_mm_hashes: bool = False) -> MultiModalInputs:
        enc = super().apply(self.create_encoder_prompt(prompt, mm_data), mm_data, hf_processor_mm_kwargs,
                            return_mm_hashes=return_mm_hashes)
        dec = (self.info.get_tokenizer().encode(prompt, add_special_tokens=False)
               if isinstance(prompt, str) else list(prompt))
        enc.encoder_prompt_token_ids, enc.prompt_token_ids = enc.prompt_token_ids, dec
        return enc
