"""transformers' own generate() for Whisper: the correctness oracle and the peer baseline.

Not a vLLM file. ``GenerationMixin.generate`` is called directly, skipping Whisper's own
generate() logic (language detection, timestamps, long-form), so both sides decode greedily
from the same decoder prompt; EOS does not stop unless ``stop_at_eos``.
"""
from __future__ import annotations

import torch
from transformers import GenerationConfig, GenerationMixin


@torch.inference_mode()
def hf_greedy_generate(model, input_features: torch.Tensor, decoder_prompt: list[int],
                       max_new_tokens: int, stop_at_eos: bool = False, encoder_outputs=None) -> list[list[int]]:
    """Greedy new token ids per audio (prompt excluded): ``max_new_tokens`` each, or with
    ``stop_at_eos`` up to and including the first EOS. ``input_features`` (batch, num_mel_bins,
    3000) in the model's dtype and device; ``decoder_prompt`` shared by the batch;
    ``encoder_outputs``: the encoder's output on ``input_features`` (``model.get_encoder()(...)``),
    computed once by a caller that generates from the same audios more than once (generate()
    then runs the decoder only)."""
    b, eos = input_features.shape[0], model.config.eos_token_id
    dec = torch.tensor([decoder_prompt] * b, dtype=torch.long, device=input_features.device)
    gc = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                          decoder_start_token_id=decoder_prompt[0],
                          pad_token_id=model.config.pad_token_id,
                          eos_token_id=eos if stop_at_eos else None,
                          use_cache=True)
    enc = {} if encoder_outputs is None else {"encoder_outputs": encoder_outputs}
    out = GenerationMixin.generate(model, input_features=input_features, decoder_input_ids=dec,
                                   generation_config=gc, **enc)
    rows = out[:, len(decoder_prompt):].tolist()
    if stop_at_eos:
        rows = [r[:r.index(eos) + 1] if eos in r else r for r in rows]
    return rows
