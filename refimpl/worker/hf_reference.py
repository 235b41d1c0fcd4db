"""Transformers' own generate() for Whisper: the correctness oracle and the peer baseline.

Not a vLLM file: the reference the engine is checked and measured against. It calls
``transformers.GenerationMixin.generate`` on the Whisper model directly, skipping
``WhisperForConditionalGeneration.generate``'s speech-specific logic (language detection,
timestamp rules, long-form chunking, suppress-token lists), so that both sides run plain
greedy decoding from the same decoder prompt. By default EOS does not stop decoding
(``eos_token_id`` unset), which is ``SamplingParams(ignore_eos=True)`` on the engine side;
``stop_at_eos=True`` stops each sequence at the model's EOS (kept as its last token, as the
engine's output does).
"""
from __future__ import annotations

import torch
from transformers import GenerationConfig, GenerationMixin


@torch.inference_mode()
def hf_greedy_generate(model, input_features: torch.Tensor, decoder_prompt: list[int],
                       max_new_tokens: int, stop_at_eos: bool = False) -> list[list[int]]:
    """Greedy-decode up to ``max_new_tokens`` tokens per audio with transformers' generate().

    input_features: (batch, num_mel_bins, 3000) in the model's dtype and device.
    decoder_prompt: the decoder prompt ids shared by the batch. Returns the new token ids
    (prompt excluded), one list of ``max_new_tokens`` ints per audio, or with ``stop_at_eos``
    one list per audio ending at its first ``model.config.eos_token_id`` (included) or at
    ``max_new_tokens``.
    """
    b, eos = input_features.shape[0], model.config.eos_token_id
    dec = torch.tensor([decoder_prompt] * b, dtype=torch.long, device=input_features.device)
    gc = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                          decoder_start_token_id=decoder_prompt[0],
                          pad_token_id=model.config.pad_token_id,
                          eos_token_id=eos if stop_at_eos else None,
                          use_cache=True)
    out = GenerationMixin.generate(model, input_features=input_features, decoder_input_ids=dec,
                                   generation_config=gc)
    rows = out[:, len(decoder_prompt):].tolist()
    if stop_at_eos:
        rows = [r[:r.index(eos) + 1] if eos in r else r for r in rows]
    return rows
