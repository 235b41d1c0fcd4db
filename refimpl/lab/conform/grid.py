"""The conformance grid (the settings the probe drives in vLLM and the oracles answer) and the
model directories without weights the probe loads (config, preprocessor config, tokenizer).

Qwen2.5-VL-3B: max_model_len x image/video limits x max_pixels x max_num_batched_tokens at
max_num_seqs 8 (72 settings), the first max_model_len again with the user's processing cache off
(``disable_mm_preprocessor_cache``: 24), plus a lookup-only set at long contexts (no profile run:
a 128k dummy video is GBs); Whisper large-v3 at two batching budgets.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Optional

from refimpl.config import get_config_dict, get_preprocessor_dict

QWEN, WHISPER = "qwen2.5-vl-3b", "whisper-large-v3"
MAX_MODEL_LENS = (4096, 8192, 16384)
LIMITS = ((1, 1), (0, 1), (1, 0), (3, 2))  # (image, video) per prompt
MAX_PIXELS: tuple[Optional[int], ...] = (None, 1003520, 200704)  # None: the preprocessor's 12845056
BATCHED = (2048, 8192)
MAX_NUM_SEQS = 8
LOOKUP_ONLY_LENS = (32768, 65536, 128000)
WHISPER_BATCHED = (2048, 8192)
BLOCK_SIZE = 16
Setting = dict[str, Any]


def setting_id(s: Setting) -> str:
    """A setting's name in tables and known-difference lists, e.g. ``qwen 4096 i1v1 px=default b2048``."""
    if s["model"] == WHISPER:
        return f"whisper {s['max_model_len']} b{s['max_num_batched_tokens']} block{s['block_size']}"
    lim = s["limits"]
    px = s["max_pixels"] or "default"
    tail = (" cache-off" if s.get("disable_mm_preprocessor_cache") else "") + \
        (" lookup-only" if s.get("lookup_only") else "")
    return f"qwen {s['max_model_len']} i{lim['image']}v{lim['video']} px={px} b{s['max_num_batched_tokens']}{tail}"


def qwen_settings(quick: bool = False) -> list[Setting]:
    """The 72 settings (``quick``: the first max_model_len only, 24), the first max_model_len's 24
    with the user's cache off, then the lookup-only set (3)."""
    lens = MAX_MODEL_LENS[:1] if quick else MAX_MODEL_LENS
    out = [dict(model=QWEN, max_model_len=n, limits={"image": i, "video": v}, max_pixels=px,
                max_num_batched_tokens=b, max_num_seqs=MAX_NUM_SEQS)
           for n, (i, v), px, b in itertools.product(lens, LIMITS, MAX_PIXELS, BATCHED)]
    out += [dict(s, disable_mm_preprocessor_cache=True) for s in out if s["max_model_len"] == MAX_MODEL_LENS[0]]
    out += [dict(model=QWEN, max_model_len=n, limits={"image": 1, "video": 1}, max_pixels=None,
                 max_num_batched_tokens=8192, max_num_seqs=MAX_NUM_SEQS, lookup_only=True)
            for n in ([] if quick else LOOKUP_ONLY_LENS)]
    return [dict(s, id=setting_id(s)) for s in out]


def whisper_settings() -> list[Setting]:
    out = [dict(model=WHISPER, max_model_len=448, limits={"audio": 1}, max_pixels=None,
                max_num_batched_tokens=b, max_num_seqs=MAX_NUM_SEQS, block_size=BLOCK_SIZE)
           for b in WHISPER_BATCHED]
    return [dict(s, id=setting_id(s)) for s in out]


def model_dir(root: Path, model: str) -> Path:
    """``root/model``: config.json and preprocessor_config.json as shipped (refimpl/data/) and the
    tokenizer refimpl builds in code, saved with ``save_pretrained`` (no weights, no hub)."""
    from refimpl.tokenizer import get_tokenizer
    d = root / model
    if (d / "tokenizer_config.json").exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(get_config_dict(model), indent=1))
    (d / "preprocessor_config.json").write_text(json.dumps(get_preprocessor_dict(model), indent=1))
    get_tokenizer(model).save_pretrained(str(d))
    return d


def probe_spec(root: Path, quick: bool = False) -> dict[str, Any]:
    """What the probe reads: the model directories and every setting."""
    return {"qwen_dir": str(model_dir(root, QWEN)), "whisper_dir": str(model_dir(root, WHISPER)),
            "qwen": qwen_settings(quick), "whisper": whisper_settings()}
