"""vLLM-level multimodal processor: HF processing with and without the processing cache.

Mirrors ``BaseMultiModalProcessor`` / ``EncDecMultiModalProcessor`` of
``vllm/multimodal/processing.py`` (0.9.0). Cached: hash each item, HF-process the misses alone,
store per item, tokenize the prompt and expand placeholders; uncached: one HF call; both give
identical outputs. ``BaseProcessingInfo`` and the HF call are in refimpl.multimodal.processing_context
(vLLM's ``processing/context.py``), importable from here too. Left out: text-level prompt updates,
``PromptInsertion``, ``is_embed``, embedding inputs, tokenization kwargs.
"""
from __future__ import annotations

import copy
import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import torch

from refimpl.errors import InvalidInputError
from refimpl.multimodal.cache import MultiModalHasher, ProcessingCache
from refimpl.multimodal.hasher import hash_kwargs_by
from refimpl.multimodal.inputs import MultiModalInputs, split_hf_outputs
from refimpl.multimodal.parse import parse_mm_data, split_items
from refimpl.multimodal.processing_context import BaseProcessingInfo, call_hf_processor  # noqa: F401
from refimpl.multimodal.prompt_updates import (
    Updates,
    apply_token_matches,
    check_unused_placeholders,
    find_mm_placeholders,
)

Items = dict[str, list[Any]]                      # modality -> raw items
KwItems = dict[str, list[dict[str, torch.Tensor]]]  # modality -> per-item tensors


def request_scoped_uuids(request_id: str, mm_data: Optional[dict[str, Any]]) -> dict[str, list[str]]:
    """``{modality: ["<request_id>-<modality>-<i>", ...]}``, one id per item as ``split_items``
    counts them: the items' identifiers when no cache reads a content hash (vLLM
    ``Processor._maybe_build_mm_uuids``, PR #23690, 0.10.2 on)."""
    if not isinstance(mm_data, dict):
        return {}
    return {m: [f"{request_id}-{m}-{i}" for i in range(len(split_items(m, d)))] for m, d in mm_data.items()}


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
            return self._postprocess_hf_outputs(call_hf_processor(hf, inputs, kw, self.info.call_kwargs))

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
        self.stats.hash_calls += 1
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

    def _cached_apply_hf_processor(self, prompt, items: Items, kw: dict, return_mm_hashes: bool,
                                   mm_uuids: Optional[dict[str, list[str]]] = None):
        if self.cache is None:  # the request's ids (PR #23690); else hashed when asked, or from
            if mm_uuids is not None:  # vLLM 0.10.2 always (hash_uncached: profiling, no request)
                hashes = {m: list(mm_uuids[m]) for m in items}
            else:
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

    def for_call(self, hf_processor_mm_kwargs: Optional[dict[str, Any]]) -> "BaseMultiModalProcessor":
        """This processor as a call with its own ``mm_processor_kwargs`` sees it (itself when there are
        none): the call's values merged over the model-level ones and checked by the same rules
        (``check_mm_processor_kwargs``), the HF processor built from the merged values (so
        Qwen2.5-VL's min / max_pixels become its ``size``, as the model-level ones do), the cache
        keyed by them. Raises InvalidInputError: ``mm_processor_kwargs`` (not a dict, an unknown
        key, a value the HF processor refuses) or ``mm_processor_kwargs.<key>`` (a value out of range)."""
        if hf_processor_mm_kwargs is None:
            return self
        if not isinstance(hf_processor_mm_kwargs, dict):
            raise InvalidInputError("mm_processor_kwargs", "a dict {setting: value}",
                                    f"got {type(hf_processor_mm_kwargs).__name__}")
        if not hf_processor_mm_kwargs:
            return self
        info = self.info.for_call(dict(hf_processor_mm_kwargs))
        proc = copy.copy(self)
        proc.info, proc.dummy_inputs = info, copy.copy(self.dummy_inputs)
        proc.dummy_inputs.info = info
        return proc

    def request_uuids(self, request_id: str, mm_data: Optional[dict[str, Any]]) -> Optional[dict[str, list[str]]]:
        """The items' ids for ``apply(mm_uuids=...)``: ``request_scoped_uuids`` when no cache (and so
        no mirror) reads a content hash, else None (content hashes), as vLLM's Processor (PR #23690)."""
        return request_scoped_uuids(request_id, mm_data) if self.cache is None else None

    def max_tokens_per_item(self) -> dict[str, int]:
        """Placeholder tokens of the largest item per modality under the model-level settings, by
        the model's formula at ``max_model_len``: what the encoder budget, the profile run and
        admission are sized from (``max_tokens_per_item``)."""
        return self.info.get_max_tokens_per_item(self.info.model_config.max_model_len,
                                                 {m: 1 for m in self.info.modalities})

    def apply(self, prompt: str | list[int], mm_data: Optional[dict[str, Any]],
              hf_processor_mm_kwargs: Optional[dict[str, Any]] = None, *,
              return_mm_hashes: bool = False,
              mm_uuids: Optional[dict[str, list[str]]] = None) -> MultiModalInputs:
        """Process one prompt and its items (``mm_data``: ``{modality: item | [items]}``);
        ``hf_processor_mm_kwargs``: this call's ``mm_processor_kwargs`` (``for_call``).

        ``mm_hashes``: with the cache on, content hashes (the cache reads them); with it off,
        ``mm_uuids`` (ids per modality and item, e.g. ``request_scoped_uuids``: no content is
        hashed, vLLM PR #23690) if given, else content hashes when ``return_mm_hashes`` asks or the
        row hashes uncached items (``hash_uncached``), else none. Raises
        InvalidInputError / TooManyItemsError, and InvalidInputError ("mm_processor_kwargs") when
        the call's settings make an item larger than ``max_tokens_per_item()``; the processor and
        the cache stay usable."""
        proc = self.for_call(hf_processor_mm_kwargs)
        out = proc._apply(prompt, mm_data, return_mm_hashes, mm_uuids)
        if proc is not self:
            limits = self.max_tokens_per_item()
            for m, ranges in out.mm_placeholders.items():
                for i, r in enumerate(ranges):
                    if r.length > limits.get(m, r.length):
                        raise InvalidInputError(
                            "mm_processor_kwargs", f"{limits[m]} tokens per {m} (max_tokens_per_item)",
                            f"{proc.info.call_kwargs} make {m} item {i} {r.length} tokens, more than "
                            f"the budget and the profile run were sized for")
        return out

    def _apply(self, prompt, mm_data, return_mm_hashes: bool, mm_uuids) -> MultiModalInputs:
        kw: dict[str, Any] = {}  # a call's settings are in the HF processor this view built
        items = parse_mm_data(mm_data, self.info.get_allowed_mm_limits(),
                              keep_float64=self.info.switches.dummy_audio_dtype == "float64",
                              background=self.info.model_config.rgba_background_color)
        counts = {m: len(v) for m, v in items.items()}
        if mm_uuids is not None and any(len(mm_uuids.get(m, ())) != n for m, n in counts.items()):
            raise InvalidInputError("mm_uuids", f"one id per item {counts}",
                                    f"got {({m: len(v) for m, v in mm_uuids.items()})}")
        ids, mm_kwargs, hashes, applied = self._cached_apply_hf_processor(prompt, items, kw,
                                                                          return_mm_hashes, mm_uuids)
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
              return_mm_hashes: bool = False, mm_uuids=None) -> MultiModalInputs:
        enc = super().apply(self.create_encoder_prompt(prompt, mm_data), mm_data, hf_processor_mm_kwargs,
                            return_mm_hashes=return_mm_hashes, mm_uuids=mm_uuids)
        dec = (self.info.get_tokenizer().encode(prompt, add_special_tokens=False)
               if isinstance(prompt, str) else list(prompt))
        enc.encoder_prompt_token_ids, enc.prompt_token_ids = enc.prompt_token_ids, dec
        return enc
