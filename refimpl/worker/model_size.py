"""Parameter counts of the shipped architectures from ``config.json`` alone (no torch, no transformers).

The count of each layer as vLLM and transformers define it (vllm/model_executor/models/whisper.py,
qwen2_5_vl.py, qwen2.py; transformers' modeling_whisper.py, modeling_qwen2_5_vl.py), tied weights
once. tests/worker/test_model_size.py checks every count against the HF model built on the meta
device for every shipped config and scale. The start-up plan (a dry walk) reads these, so the lab's
pages and the plan need no model class; ``model_loader.parameter_bytes`` is this module's
``parameter_bytes``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from refimpl.config import get_config_dict

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def _linear(n_in: int, n_out: int, bias: bool) -> int:
    return n_in * n_out + (n_out if bias else 0)


def _whisper_attention(d: int) -> int:
    """q, v, out with bias; k without (WhisperAttention, vLLM's QKVParallelLinear + RowParallelLinear)."""
    return 3 * _linear(d, d, True) + _linear(d, d, False)


def whisper_parameters(cfg: dict[str, Any]) -> int:
    """Parameters of ``WhisperForConditionalGeneration``: conv1 (k=3), conv2 (k=3, stride 2), the
    encoder's sinusoid table (a parameter, frozen) and layers, the decoder's learned positions, token
    embedding and layers (self- and cross-attention), LayerNorms (weight and bias), ``proj_out``
    (tied to ``embed_tokens`` unless ``tie_word_embeddings`` is false)."""
    d, mel, vocab = cfg["d_model"], cfg["num_mel_bins"], cfg["vocab_size"]
    ln = 2 * d
    enc_layer = _whisper_attention(d) + ln + _linear(d, cfg["encoder_ffn_dim"], True) \
        + _linear(cfg["encoder_ffn_dim"], d, True) + ln
    dec_layer = 2 * (_whisper_attention(d) + ln) + _linear(d, cfg["decoder_ffn_dim"], True) \
        + _linear(cfg["decoder_ffn_dim"], d, True) + ln
    encoder = (mel * 3 * d + d) + (d * 3 * d + d) + cfg["max_source_positions"] * d \
        + cfg["encoder_layers"] * enc_layer + ln
    decoder = vocab * d + cfg["max_target_positions"] * d + cfg["decoder_layers"] * dec_layer + ln
    proj_out = 0 if cfg.get("tie_word_embeddings", True) else vocab * d
    return encoder + decoder + proj_out


def _qwen2_5_vision_parameters(v: dict[str, Any]) -> int:
    """Qwen2_5_VisionTransformer: Conv3d patch embedding (no bias), blocks of RMSNorm x2, qkv and
    proj with bias, a gated MLP with bias; the patch merger (RMSNorm, two Linears with bias)."""
    h, inter, merge = v["hidden_size"], v["intermediate_size"], v["spatial_merge_size"]
    patch = v["in_chans"] * v["temporal_patch_size"] * v["patch_size"] ** 2 * h
    block = 2 * h + _linear(h, 3 * h, True) + _linear(h, h, True) \
        + 2 * _linear(h, inter, True) + _linear(inter, h, True)
    hm = h * merge ** 2
    merger = h + _linear(hm, hm, True) + _linear(hm, v["out_hidden_size"], True)
    return patch + v["depth"] * block + merger


def qwen2_5_vl_parameters(cfg: dict[str, Any]) -> int:
    """Parameters of ``Qwen2_5_VLForConditionalGeneration``: the vision tower and the Qwen2 language
    model (embedding; per layer q/k/v with bias, o without, a gated MLP without bias, two RMSNorms;
    the final norm), ``lm_head`` tied to the embedding unless ``tie_word_embeddings`` is false."""
    text = {**cfg, **cfg.get("text_config", {})}
    h, vocab, nh = text["hidden_size"], text["vocab_size"], text["num_attention_heads"]
    hd = text.get("head_dim") or h // nh
    kv = text["num_key_value_heads"] * hd
    layer = _linear(h, nh * hd, True) + 2 * _linear(h, kv, True) + _linear(nh * hd, h, False) \
        + 3 * _linear(h, text["intermediate_size"], False) + 2 * h
    language = vocab * h + text["num_hidden_layers"] * layer + h
    lm_head = 0 if text.get("tie_word_embeddings", True) else vocab * h
    return _qwen2_5_vision_parameters(cfg["vision_config"]) + language + lm_head


_COUNTS: dict[str, Callable[[dict[str, Any]], int]] = {
    "whisper": whisper_parameters,
    "qwen2_5_vl": qwen2_5_vl_parameters,
}


def parameter_count(config_dict: dict[str, Any]) -> int:
    """Parameters (tied once) of the model a shipped ``config.json`` dict describes. KeyError for a
    ``model_type`` the kit does not ship."""
    return _COUNTS[config_dict["model_type"]](config_dict)


def parameter_bytes(model_config) -> int:
    """Bytes of the model's parameters in ``model_config.dtype`` (tied once), counted from its
    config.json; cached per (model, scale, dtype)."""
    return _parameter_bytes(model_config.model, model_config.scale, model_config.dtype)


@functools.lru_cache(maxsize=None)
def _parameter_bytes(model: str, scale: str, dtype: str) -> int:
    return parameter_count(get_config_dict(model, scale)) * DTYPE_BYTES[dtype]
