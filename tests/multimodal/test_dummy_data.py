"""Dummy inputs for profiling: sizes, formula == processing, cache reuse, encoder length."""
import numpy as np
import pytest

from refimpl.config import ModelConfig, MultiModalSwitches, SchedulerConfig
from refimpl.core.encoder_cache_manager import compute_encoder_budget
from refimpl.multimodal import MultiModalProfiler, MultiModalRegistry
from tests.multimodal.utils import qwen


def test_video_frames_at_128k_by_formula():
    reg = MultiModalRegistry()
    mc = qwen(128000)  # the kit's default switches: frames fitted to the whole seq_len, no cap
    info = reg.create_processor(mc).info
    assert info.get_num_frames_with_most_features(128000, {"image": 1, "video": 1}) == 14
    assert info.get_num_frames_with_most_features(128000, {"video": 1}) == 14
    assert info.get_num_frames_with_most_features(128000, {"image": 1, "video": 4}) == 2  # 3, even
    assert reg.get_max_tokens_per_item_by_modality(mc, use_formula=True) == {"image": 16384, "video": 114688}
    assert compute_encoder_budget(mc, SchedulerConfig(), reg, use_formula=True) == (114688, 114688)
    # vLLM until 0.10.1 took the image tokens out first: 12 frames, 98304 tokens
    old = reg.create_processor(mc, switches=MultiModalSwitches(frame_fit="minus-images")).info
    assert old.get_num_frames_with_most_features(128000, {"image": 1, "video": 1}) == 12
    assert old.get_max_tokens_per_item(128000, {"image": 1, "video": 1}) == {"image": 16384, "video": 98304}
    capped = reg.create_processor(mc, switches=MultiModalSwitches(max_frames_per_video=4)).info
    assert capped.get_num_frames_with_most_features(128000, {"video": 1}) == 4
    assert reg.stats.hf_processor_calls == 0  # the formula never runs the HF processor


@pytest.mark.parametrize("seq_len,counts", [(50, {"image": 1, "video": 1}), (300, {"image": 1, "video": 1}),
                                            (1000, {"image": 1, "video": 1}), (1000, {"video": 2})])
def test_formula_equals_processed_dummy_tokens(seq_len, counts):
    reg = MultiModalRegistry()
    proc = reg.create_processor(qwen(4096, small=True, limit_mm_per_prompt={"image": 1, "video": 2}))
    info = proc.info
    frames = info.get_num_frames_with_most_features(seq_len, counts)
    assert frames == 1 or frames % 2 == 0  # one frame when none fits (padded to two), as vLLM
    want = info.get_max_tokens_per_item(seq_len, counts)
    inputs = proc.apply(*vars(proc.dummy_inputs.get_dummy_processor_inputs(seq_len, counts)).values())
    assert inputs.mm_kwargs["video"][0]["video_grid_thw"][0] == (frames + frames % 2) // 2
    got = {m: ph[0].length for m, ph in inputs.mm_placeholders.items()}
    assert got == want
    total = MultiModalProfiler(proc).get_mm_max_tokens(seq_len, counts)
    assert total == {m: n * counts[m] for m, n in want.items()}


def test_qwen_decoder_dummy_data():
    reg = MultiModalRegistry()
    mc = qwen(2048, small=True)
    d = reg.get_decoder_dummy_data(mc, 1000, {"image": 1})
    assert len(d.prompt_token_ids) == 1000 and d.prompt_token_ids[:113] == [151655] * 113
    assert set(d.prompt_token_ids[113:]) == {0}
    assert d.multi_modal_data["image"][0]["pixel_values"].shape == (4 * 113, 1176)
    assert d.multi_modal_placeholders["image"][0].length == 113
    # all modalities disabled -> no encoder budget
    off = qwen(2048, limit_mm_per_prompt={"image": 0, "video": 0})
    assert reg.get_max_tokens_per_item_by_nonzero_modality(off) == {}
    assert compute_encoder_budget(off, SchedulerConfig(), reg) == (0, 0)


@pytest.mark.parametrize("model,mels", [("whisper-tiny", 80), ("whisper-large-v3", 128)])
def test_whisper_dummy_and_encdec_len(model, mels):
    reg = MultiModalRegistry()
    mc = ModelConfig(model, device="cpu")
    proc = reg.create_processor(mc)
    audio = proc.dummy_inputs.get_dummy_mm_data(448, {"audio": 1})["audio"][0]
    assert audio.dtype == np.float32 and audio.shape == (480000,) and not audio.any()
    assert proc.dummy_inputs.get_dummy_text({"audio": 2}) == "<|startoftranscript|>" * 2
    dec = reg.get_decoder_dummy_data(mc, 448)
    assert dec.prompt_token_ids[0] == 50258 and len(dec.prompt_token_ids) == 448
    assert dec.multi_modal_data["audio"][0]["input_features"].shape == (mels, 3000)
    assert reg.get_encoder_dummy_data(mc, 448).prompt_token_ids == [0] * 1500
    assert reg.get_max_tokens_per_item_by_modality(mc) == {"audio": 1500}
    sc = SchedulerConfig(max_num_encoder_input_tokens=1500, encoder_cache_size=1024)
    assert compute_encoder_budget(mc, sc, reg) == (1500, 1500)

    reg.reset_stats()
    cached = reg.cache_bytes()
    for i in range(3):
        assert reg.get_encdec_max_encoder_len(mc) == 1500
        assert reg.stats.encdec_calls == i + 1 and reg.stats.hf_mm_passes == i + 1  # nothing cached
    assert reg.cache_bytes() == cached and reg.stats.encdec_s > 0
    assert reg.get_encdec_max_encoder_len(qwen(2048)) == 0 and reg.stats.encdec_calls == 4
    assert reg.stats.hf_mm_passes == 3
