"""Real whisper-tiny.en weights: the CTranslate2 reader and mapping, WER on the speech clips,
and the engine against transformers' generate() stopping at EOS.

Tolerance of the WER test: greedy decoding with the correctly mapped weights gives a pooled
WER near 0.28 on these espeak-ng clips (a synthetic voice that tiny.en, 39M parameters, partly
mishears; `refimpl bench wer` prints the table). Any mapping error (a swapped or mis-split
fused projection, missing position encodings, untied output projection) yields unrelated text
or none, a WER near or above 1 on every clip. The bounds (pooled <= 0.40, at least half the
clips <= 0.20) separate the two with room for float differences between CPUs.
"""
import struct

import pytest
import torch

from refimpl.config import ModelConfig, get_config_dict
from refimpl.errors import ConfigError
from refimpl.worker.ct2_loader import (
    Ct2LayoutError,
    ct2_to_hf_whisper,
    load_ct2_state_dict,
    package_model_dir,
    read_ct2_model,
)

pytestmark = pytest.mark.slow  # the real whisper-tiny.en weights


MODEL = "whisper-tiny.en"
CFG = get_config_dict(MODEL)


@pytest.fixture(scope="module")
def ct2_vars():
    return read_ct2_model(package_model_dir() / "model.bin")


@pytest.fixture(scope="module")
def model():
    from refimpl.worker.model_loader import get_model
    return get_model(ModelConfig(MODEL, device="cpu"))


@pytest.fixture(scope="module")
def hf_tokens(model):
    from refimpl.lab.bench.wer import transcribe_clips
    return transcribe_clips(model, max_new_tokens=48)


def test_reader_and_mapping_shapes(ct2_vars, model):
    spec, var = ct2_vars
    assert spec == "WhisperSpec" and var["decoder/projection/weight"] is var["decoder/embeddings/weight"]
    assert var["encoder/layer_0/self_attention/linear_0/weight"].shape == (3 * 384, 384)
    assert ModelConfig(MODEL, device="cpu").load_format == "ct2"
    assert ModelConfig("whisper-tiny", device="cpu").load_format == "dummy"
    sd = load_ct2_state_dict(CFG)
    state = model.state_dict()
    assert set(state) == set(sd) | {"proj_out.weight"}
    for k, v in sd.items():
        assert torch.equal(state[k], v.float()), k
    d = 384
    qkv = var["decoder/layer_2/self_attention/linear_0/weight"].float()
    assert torch.equal(model.model.decoder.layers[2].self_attn.v_proj.weight, qkv[2 * d:])
    assert model.proj_out.weight.data_ptr() == model.model.decoder.embed_tokens.weight.data_ptr()


@pytest.mark.parametrize("edit, field", [
    (lambda v: v.__setitem__("encoder/conv1/weight", torch.zeros(384, 80, 2)), "encoder/conv1/weight"),
    (lambda v: v.pop("decoder/layer_3/attention/linear_1/bias"), "decoder/layer_3/attention/linear_1/bias"),
    (lambda v: v.__setitem__("decoder/layer_9/ffn/linear_0/weight", torch.zeros(1)), "decoder/layer_9/ffn/linear_0/weight"),
    (lambda v: v.__setitem__("encoder/num_heads", torch.tensor(8, dtype=torch.int16)), "encoder/num_heads"),
    (lambda v: v.__setitem__("decoder/activation", torch.tensor(1, dtype=torch.int8)), "decoder/activation"),
    (lambda v: v.__setitem__("encoder/layer_1/self_attention/linear_0/bias", torch.ones(1152)),
     "encoder/layer_1/self_attention/linear_0/bias"),
])
def test_unknown_layout_refused(ct2_vars, edit, field):
    spec, var = ct2_vars
    var = dict(var)
    edit(var)
    with pytest.raises(Ct2LayoutError) as ei:
        ct2_to_hf_whisper(spec, var, CFG)
    assert ei.value.field == field
    with pytest.raises(Ct2LayoutError, match="spec"):
        ct2_to_hf_whisper("TransformerSpec", dict(ct2_vars[1]), CFG)


def test_binary_format_refused(tmp_path):
    head = (package_model_dir() / "model.bin").read_bytes()[:4096]
    (tmp_path / "v5.bin").write_bytes(struct.pack("<I", 5) + head[4:])
    with pytest.raises(Ct2LayoutError, match="binary version 5"):
        read_ct2_model(tmp_path / "v5.bin")
    (tmp_path / "cut.bin").write_bytes(head)
    with pytest.raises(Ct2LayoutError) as ei:
        read_ct2_model(tmp_path / "cut.bin")
    assert isinstance(ei.value, ConfigError)
    with pytest.raises(ConfigError, match="load_format"):
        ModelConfig("whisper-tiny", device="cpu", load_format="ct2")


def test_generate_transcribes_speech_clips(hf_tokens):
    from refimpl.lab.bench.wer import word_error_rates
    res = word_error_rates(hf_tokens)
    wers = [r["wer"] for r in res["clips"]]
    assert len(wers) == 6 and res["corpus_wer"] <= 0.40, res
    assert sum(w <= 0.20 for w in wers) >= 3, res
    assert all(ids[-1] == CFG["eos_token_id"] for ids in hf_tokens.values())


def test_engine_equals_generate_on_real_weights_stopping_at_eos(model, hf_tokens):
    """0.11.0 and audios-per-step (2 audios per step) give generate()'s tokens."""
    from refimpl.audio import load_speech_clips
    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.sampling_params import SamplingParams
    clips = load_speech_clips()[:2]
    for variant, n in (("0.11.0", 1), ("audios-per-step", 2)):
        engine = LLMEngine.from_args(MODEL, device="cpu", max_num_seqs=2, num_gpu_blocks=300,
                                     encoder_len_variant=variant, max_audios_per_step=n,
                                     process_mode="inproc")
        for (name, a) in clips:
            engine.add_request(name, {"multi_modal_data": {"audio": (a, 16000)}}, SamplingParams(max_tokens=48))
        outs, encoded = {}, []
        while engine.has_unfinished_requests():
            so = engine.scheduler.schedule()
            encoded.append(len(so.scheduled_encoder_inputs))
            done = engine.scheduler.update_from_output(so, engine.model_runner.execute_model(so))
            for o in engine.output_processor.process_outputs(done):  # the scheduler's ids -> ours
                outs[o.request_id] = o
        assert max(encoded) == n, variant
        for name, _ in clips:
            assert outs[name].output_token_ids == hf_tokens[name], (variant, name)
            assert outs[name].finish_reason == "stop" and len(outs[name].output_token_ids) < 48
