"""Model loader: seeded random ("dummy") weights, shapes from the shipped configs, HF round trip."""
import math
import shutil
from pathlib import Path

import pytest
import torch

import refimpl
from refimpl.config import ModelConfig
from refimpl.worker.model_loader import get_model


def _mc(model="whisper-tiny", **kw):
    kw.setdefault("device", "cpu")
    return ModelConfig(model, **kw)


@pytest.fixture(scope="module")
def tiny():
    return get_model(_mc(seed=3))


@pytest.mark.slow
def test_dummy_whisper_tiny_shapes_and_init(tiny):
    cfg = tiny.config
    assert type(tiny).__name__ == "WhisperForConditionalGeneration" and not tiny.training
    assert (cfg.d_model, cfg.decoder_layers, cfg.decoder_attention_heads, cfg.vocab_size) == (384, 4, 6, 51865)
    assert tiny.proj_out.weight.data_ptr() == tiny.model.decoder.embed_tokens.weight.data_ptr()
    w = tiny.model.decoder.layers[0].self_attn.q_proj.weight
    assert w.dtype == torch.float32 and abs(w.std().item() - 0.02) < 2e-3
    assert torch.all(tiny.model.decoder.layers[0].final_layer_norm.weight == 1)
    assert torch.all(tiny.model.decoder.layers[0].fc1.bias == 0)
    pos = tiny.model.encoder.embed_positions.weight                 # Whisper's fixed sinusoids
    assert pos.shape == (1500, 384) and pos[0, 0].item() == 0.0 and pos[0, 192].item() == 1.0
    assert all(torch.isfinite(p).all() for p in tiny.parameters())


@pytest.mark.slow
def test_dummy_weights_are_seeded(tiny):
    same = get_model(_mc(seed=3))
    other = get_model(_mc(seed=4))
    a, b, c = (m.model.decoder.layers[1].fc2.weight for m in (tiny, same, other))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.slow
def test_dummy_qwen_small_and_dtype():
    m = get_model(_mc("qwen2.5-vl-3b", scale="small", dtype="bfloat16", max_model_len=20000))
    assert type(m).__name__ == "Qwen2_5_VLForConditionalGeneration"
    tc = m.config.get_text_config()
    assert (tc.hidden_size, tc.num_hidden_layers, tc.vocab_size) == (256, 2, 151936)
    assert m.lm_head.weight.dtype == torch.bfloat16
    inv = m.model.language_model.rotary_emb.inv_freq                 # buffers computed, not random
    assert inv[0].item() == 1.0 and torch.all(inv[1:] < 1)
    with torch.inference_mode():
        out = m.model.language_model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=False)
    assert out.last_hidden_state.shape == (1, 3, 256)


@pytest.mark.slow
def test_hf_load_round_trip(tiny, tmp_path):
    tiny.save_pretrained(tmp_path)  # a local HF directory also holds the processor's config
    shutil.copy(Path(refimpl.__file__).parent / "data" / "whisper-tiny" / "preprocessor_config.json", tmp_path)
    loaded = get_model(_mc(load_format="hf", model_path=str(tmp_path)))
    assert type(loaded).__name__ == "WhisperForConditionalGeneration" and not loaded.training
    sd_a, sd_b = tiny.state_dict(), loaded.state_dict()
    assert sd_a.keys() == sd_b.keys()
    assert all(torch.equal(sd_a[k], sd_b[k]) for k in sd_a)
    assert loaded.proj_out.weight.data_ptr() == loaded.model.decoder.embed_tokens.weight.data_ptr()
    feats = torch.randn(1, 80, 3000, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([[50258, 50259, 50359, 50363]])
    with torch.inference_mode():
        la = tiny(input_features=feats, decoder_input_ids=ids).logits
        lb = loaded(input_features=feats, decoder_input_ids=ids).logits
    assert torch.equal(la, lb) and math.isfinite(la.abs().max().item())
