"""Input types of the multimodal processor, and its batched output cut per item.

Mirrors the types of ``vllm/multimodal/inputs.py`` (0.9.0); ``split_hf_outputs`` is
``MultiModalKwargs.from_hf_inputs`` over batched / flat_from_sizes fields. The item parsing
(``vllm/multimodal/parse.py``) is in refimpl.multimodal.parse; its names are importable from here
too. Left out: embedding inputs, ``MultiModalKwargs`` batching.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from refimpl.multimodal.parse import (  # noqa: F401 - the names this module held before the split
    EXIF_ORIENTATION,
    MAX_ASPECT_RATIO,
    MAX_AUDIO_S,
    SAMPLING_RATE,
    WHITE,
    has_transparency,
    normalize_image,
    parse_audio,
    parse_image,
    parse_mm_data,
    parse_video,
    split_items,
    tensor_to_array,
)

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class PlaceholderRange:
    """Where one item's placeholder tokens sit in the prompt: ``offset`` and ``length`` (tokens)."""
    offset: int
    length: int


@dataclass
class MultiModalInputs:
    """Output of ``BaseMultiModalProcessor.apply``: ``prompt_token_ids`` (decoder prompt),
    ``mm_kwargs[modality][i]`` item i's tensors (image ``pixel_values`` (n_patches, 1176) float32,
    ``image_grid_thw`` (3,) int64; audio ``input_features`` (mel bins, 3000) float32), ``mm_hashes``,
    ``mm_placeholders``, ``encoder_prompt_token_ids`` (Whisper: 1500 zeros per audio)."""
    prompt_token_ids: list[int]
    mm_kwargs: dict[str, list[dict[str, torch.Tensor]]]
    mm_hashes: dict[str, list[str]]
    mm_placeholders: dict[str, list[PlaceholderRange]]
    encoder_prompt_token_ids: Optional[list[int]] = None
    type: str = "multimodal"


@dataclass
class ProcessorInputs:
    """Dummy inputs for profiling: prompt text, items per modality, HF processor kwargs."""
    prompt: str | list[int]
    mm_data: dict[str, list[Any]]
    hf_processor_mm_kwargs: dict[str, Any] = field(default_factory=dict)


def _own(t: torch.Tensor) -> torch.Tensor:
    """A slice that owns its memory (so cached bytes are counted right and the batch is freed)."""
    return t if t.untyped_storage().nbytes() == t.nbytes else t.clone()


def split_hf_outputs(out: dict[str, Any], fields_config: dict[str, tuple[str, Optional[str]]],
                     counts: dict[str, int]) -> dict[str, list[dict[str, torch.Tensor]]]:
    """The HF processor's batched output as {modality: [{field: tensor}, ...]}, every slice owning
    its memory. ``fields_config``: field -> (modality, sizes_field); rows by
    ``out[sizes_field].prod(-1)``, or one batch row per item when sizes_field is None."""
    import torch  # once per processor call; imported already by the processor that made ``out``

    res: dict[str, list[dict[str, torch.Tensor]]] = {m: [{} for _ in range(n)] for m, n in counts.items() if n}
    for key, (modality, sizes_key) in fields_config.items():
        if modality not in res or key not in out:
            continue
        t = out[key]
        if not isinstance(t, torch.Tensor):
            t = torch.as_tensor(t)
        parts = (t.split(out[sizes_key].prod(-1).tolist()) if sizes_key else t.unbind(0))
        for d, p in zip(res[modality], parts):
            d[key] = _own(p)
    return res
