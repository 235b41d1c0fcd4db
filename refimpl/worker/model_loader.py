"""Model loading: random-weight ("dummy") transformers models, or a local HF directory.

Mirrors ``vllm/model_executor/model_loader/`` with transformers' classes from the shipped
configs. Dummy weights: normal(0, 0.02), norms one / zero, Whisper's sinusoids, from a seeded
generator (vLLM: uniform(-1e-3, 1e-3); norms at one keep greedy argmax stable). Left out:
quantisation, sharded loading, safetensors streaming, hub downloads.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Iterator, Optional

import torch
import transformers
from torch import nn
from transformers import AutoConfig
from transformers.initialization import no_init_weights
from transformers.models.whisper.modeling_whisper import sinusoids

from refimpl.config import get_config_dict
from refimpl.errors import ConfigError
from refimpl.worker.ct2_loader import Ct2LayoutError, load_ct2_state_dict
from refimpl.worker.model_size import parameter_bytes  # noqa: F401 - its home before model_size.py

_ARCHS = {
    "whisper": "WhisperForConditionalGeneration",
    "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
}
_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm)
_shared: Optional[dict[tuple, nn.Module]] = None  # inside shared_weights(): one model per weight key


@contextlib.contextmanager
def shared_weights() -> Iterator[dict[tuple, nn.Module]]:
    """Inside: ``get_model`` builds each model once and hands every later caller of the same weights
    (``weight_key``) the same module, its parameters frozen (``requires_grad`` False; the engine only
    reads them under ``inference_mode``). For several variant engines in one process (the lab's paired
    design; vLLM has one engine, and one copy of the weights, per process). Nested scopes share the
    outer one; the engines built inside keep their model after the scope ends. Yields the
    {weight_key: model} map."""
    global _shared
    outer = _shared
    _shared = {} if outer is None else outer
    try:
        yield _shared
    finally:
        _shared = outer


def weight_key(model_config) -> tuple:
    """What the weights of ``model_config`` depend on: model, scale, dtype, device, load format, path, seed."""
    mc = model_config
    return (mc.model, mc.scale, mc.dtype, str(mc.device), mc.load_format, mc.model_path, mc.seed)


def _model_class(model_type: str):
    return getattr(transformers, _ARCHS[model_type])


def build_hf_config(config_dict: dict):
    """A transformers ``PretrainedConfig`` from a ``config.json`` dict (no hub access)."""
    d = dict(config_dict)
    return AutoConfig.for_model(d.pop("model_type"), **d)


def _is_norm(module: nn.Module) -> bool:
    return isinstance(module, _NORM_TYPES) or type(module).__name__.endswith("RMSNorm")


@torch.no_grad()
def initialize_dummy_weights(model: nn.Module, seed: int, std: float = 0.02) -> None:
    """Fill every parameter of ``model`` in place from a generator seeded with ``seed`` (tied ones
    once); deterministic per (seed, device, dtype)."""
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
        w = enc.embed_positions.weight
        w.copy_(sinusoids(*w.shape).to(w.dtype))


def meta_parameter_bytes(model_config) -> int:
    """Bytes of the model's parameters in ``model_config.dtype`` (tied once), counted on the HF model
    built on the meta device (imports its modeling module); cached per (model, scale, dtype). Equal
    to ``parameter_bytes`` (tests/worker/test_model_size.py); the engine's check phase builds it so
    that phase costs what it did before the plan read config.json (refimpl/engine/core.py)."""
    return _meta_parameter_bytes(model_config.model, model_config.scale, model_config.dtype)


@functools.lru_cache(maxsize=None)
def _meta_parameter_bytes(model: str, scale: str, dtype: str) -> int:
    cfg = build_hf_config(get_config_dict(model, scale))
    with no_init_weights(), torch.device("meta"):
        m = _model_class(cfg.model_type)._from_config(cfg, dtype=getattr(torch, dtype))
    m.tie_weights()
    return sum(p.numel() * p.element_size() for p in m.parameters())


def get_model(model_config) -> nn.Module:
    """The model of ``model_config`` in eval mode on its device: ``load_format`` "dummy" (seeded random
    weights), "hf" (``from_pretrained(model_path)``, local only) or "ct2" (tiny.en's real weights,
    cast to ``dtype``); inside ``shared_weights()`` the one already built for the same ``weight_key``.
    Raises ConfigError("model_path") for a directory without a loadable config or weights of a
    supported architecture."""
    if _shared is None:
        return _load_model(model_config)
    key = weight_key(model_config)
    if key not in _shared:
        _shared[key] = _load_model(model_config).requires_grad_(False)
    return _shared[key]


def _load_model(model_config) -> nn.Module:
    dtype = getattr(torch, model_config.dtype)
    device = torch.device(model_config.device)
    if model_config.load_format == "hf":
        path = model_config.model_path
        try:
            cfg = AutoConfig.from_pretrained(path, local_files_only=True)
            model = _model_class(cfg.model_type).from_pretrained(path, local_files_only=True, dtype=dtype)
        except (OSError, ValueError, KeyError) as e:
            raise ConfigError("model_path", "a local HF directory with config.json and weights",
                              f"cannot load {path!r}: {e}") from e
        return model.to(device).eval()
    cfg = build_hf_config(model_config.hf_config_dict)
    cls = _model_class(cfg.model_type)
    with no_init_weights(), device:
        model = cls._from_config(cfg, dtype=dtype)
    model.tie_weights()
    if model_config.load_format == "ct2":
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
