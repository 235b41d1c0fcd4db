"""Tokenizers built in code carry the real special tokens at the real ids."""
import pytest

from refimpl.errors import UnknownModelError
from refimpl.tokenizer import get_tokenizer

QWEN_IDS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
            "<|vision_start|>": 151652, "<|vision_end|>": 151653, "<|vision_pad|>": 151654,
            "<|image_pad|>": 151655, "<|video_pad|>": 151656, "<|file_sep|>": 151664}
TINY_IDS = {"<|endoftext|>": 50257, "<|startoftranscript|>": 50258, "<|en|>": 50259, "<|zh|>": 50260,
            "<|su|>": 50357, "<|translate|>": 50358, "<|transcribe|>": 50359, "<|startoflm|>": 50360,
            "<|startofprev|>": 50361, "<|nospeech|>": 50362, "<|notimestamps|>": 50363,
            "<|0.00|>": 50364, "<|30.00|>": 51864}


def test_qwen_special_ids():
    tok = get_tokenizer("qwen2.5-vl-3b")
    assert type(tok).__name__ == "Qwen2Tokenizer" and len(tok) == 151665
    assert {t: tok.convert_tokens_to_ids(t) for t in QWEN_IDS} == QWEN_IDS
    ids = tok("a <|vision_start|><|image_pad|><|image_pad|><|vision_end|>").input_ids
    assert ids[-4:] == [151652, 151655, 151655, 151653]
    assert tok.decode(tok("Hello, wörld!").input_ids) == "Hello, wörld!"


@pytest.mark.parametrize("model,vocab,shift", [("whisper-tiny", 51865, 0), ("whisper-large-v3", 51866, 1)])
def test_whisper_special_ids(model, vocab, shift):
    tok = get_tokenizer(model)
    assert type(tok).__name__ == "WhisperTokenizer" and len(tok) == vocab
    want = {t: i + (shift if i >= 50357 + shift and t != "<|su|>" else 0) for t, i in TINY_IDS.items()}
    want["<|su|>"] = 50357
    assert {t: tok.convert_tokens_to_ids(t) for t in want} == want
    if shift:
        assert tok.convert_tokens_to_ids("<|yue|>") == 50358
    assert tok.convert_ids_to_tokens(vocab - 1) == "<|30.00|>"
    tok.set_prefix_tokens(language="en", task="transcribe", predict_timestamps=False)
    try:
        assert tok.prefix_tokens == [50258, 50259, 50359 + shift, 50363 + shift]
    finally:
        tok.set_prefix_tokens(language=None, task=None)
    assert tok.eos_token_id == 50257
    assert tok("<|startoftranscript|>", add_special_tokens=False).input_ids == [50258]


def test_cached_fast_and_unknown():
    tok = get_tokenizer("whisper-tiny")
    assert get_tokenizer("whisper-tiny") is tok
    with pytest.raises(UnknownModelError):
        get_tokenizer("gpt2")
