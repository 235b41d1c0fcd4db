"""The API change policy (0.2.0): old row names start their row with a DeprecationWarning
naming it; "shape-only" says which row it now means; the public gaps of issue 28 filled."""
import warnings

import pytest

import refimpl.testing as rt
from refimpl.engine.core import EngineCore
from refimpl.errors import ConfigError
from refimpl.multimodal import MultiModalRegistry
from refimpl.variants import ENCODER_LEN_VARIANTS, STARTUP_VARIANTS

SMALL_QWEN = dict(max_model_len=4096, mm_processor_kwargs={"max_pixels": 28 * 28 * 64})


def small_qwen(registry):
    return rt.create_vllm_config(rt.QWEN, max_num_batched_tokens=4096, mm_registry=registry, **SMALL_QWEN)


@pytest.mark.slow
def test_an_old_row_name_warns_and_starts_its_row():
    reg = MultiModalRegistry()
    with pytest.warns(DeprecationWarning, match=r"'cache-reset' is deprecated .* it is row '0\.9\.0'"):
        with rt.count_hf_passes(reg) as passes:
            engine = EngineCore(small_qwen(reg), "cache-reset")
    assert engine.variant == "0.9.0" and engine.switches is STARTUP_VARIANTS["0.9.0"]
    assert engine.report.passes_by_phase == rt.hf_passes_by_phase(small_qwen(MultiModalRegistry()), "0.9.0")
    # passes_by_phase counts the passes with items; the cached path adds one text-only pass each
    assert passes.with_items == sum(engine.report.passes_by_phase.values()) == 1
    assert passes.without_items == engine.mm_registry.stats.hf_processor_calls - 1 > 0


def test_every_old_name_is_accepted_where_its_row_lives():
    for old, new in rt.LEGACY_NAMES.items():
        if old == "shape-only":
            continue
        with pytest.warns(DeprecationWarning, match=repr(new).replace("+", r"\+")):
            assert rt.current_row_name(old) == new
        assert new in STARTUP_VARIANTS or new in ENCODER_LEN_VARIANTS
    with pytest.warns(DeprecationWarning, match="it is row '0.11.0'"):
        assert rt.create_vllm_config(encoder_len_variant="scheduler-config").encoder_len_variant == "0.11.0"
    with pytest.warns(DeprecationWarning, match="'audios-per-step@4'"):
        assert rt.current_row_name("encoder-batch@4") == "audios-per-step@4"


def test_shape_only_says_which_row_it_now_means():
    with pytest.warns(DeprecationWarning, match=r"now means refimpl's shape-only row.*'0\.9\.0\+#19756\+#24925\+uint8\+shape-only'"):
        assert rt.current_row_name("shape-only") == "shape-only"
    with pytest.warns(DeprecationWarning, match="now means"):
        rt.max_tokens_per_item(rt.QWEN, "shape-only", **SMALL_QWEN)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # current names stay silent
        rt.max_tokens_per_item(rt.QWEN, "0.9.0+#19756+#24925+uint8+shape-only", **SMALL_QWEN)
        assert rt.current_row_name("0.13.0") == "0.13.0"


def test_the_oracle_takes_a_rows_record_without_the_old_name_warning():
    vc = small_qwen(MultiModalRegistry())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a record names its row: nothing to warn about
        shape_only = rt.hf_passes_by_phase(vc, STARTUP_VARIANTS["shape-only"])
        old = rt.hf_passes_by_phase(vc, STARTUP_VARIANTS["0.9.0"])
        assert old == rt.hf_passes_by_phase(vc, "0.9.0") and sum(old.values()) > 0
    with pytest.warns(DeprecationWarning, match="now means"):
        assert rt.hf_passes_by_phase(vc, "shape-only") == shape_only


@pytest.mark.slow
def test_count_hf_passes_survives_the_start_up_stats_reset():
    reg = MultiModalRegistry()
    with rt.count_hf_passes(reg) as passes:
        EngineCore(small_qwen(reg), "0.8.5")
        EngineCore(small_qwen(reg), "0.8.5")  # zeroes reg.stats again: the count keeps both
    one = sum(rt.hf_passes_by_phase(small_qwen(MultiModalRegistry()), "0.8.5").values())
    assert passes.with_items == 2 * one and passes.total == 2 * reg.stats.hf_processor_calls
    assert reg.stats._watchers == []


def test_max_audios_per_step_and_encoder_len_rows():
    cfg = rt.create_vllm_config(encoder_len_variant="audios-per-step", max_audios_per_step=4)
    assert cfg.scheduler_config.max_num_encoder_input_tokens == 4 * rt.ENCODER_LEN
    with pytest.raises(ConfigError) as e:
        rt.create_vllm_config(max_audios_per_step=4)
    assert e.value.field == "max_audios_per_step"
    assert rt.ENCODER_LEN_ROWS == tuple(ENCODER_LEN_VARIANTS) and "0.13.0" in rt.ENCODER_LEN_ROWS
    assert rt.encoder_len_sources("0.10.2") == dict.fromkeys(rt.ENCODER_LEN_SITES, "registry")
    assert rt.encoder_len_sources("0.11.0") == dict.fromkeys(rt.ENCODER_LEN_SITES, "config")


@pytest.mark.parametrize("batched,blocks13", [(2048, 128), (8192, 512), (32768, 2048)])
def test_cross_attention_blocks_per_row(batched, blocks13):
    cfg = rt.create_vllm_config(max_num_batched_tokens=batched)
    assert {v: rt.cross_attention_blocks(cfg, v) for v in ("0.10.2", "0.11.0", "0.13.0", "0.14.0")} == {
        "0.10.2": 94, "0.11.0": 94, "0.13.0": blocks13, "0.14.0": 94}
    assert rt.cross_attention_blocks(cfg) == 94 and cfg.encoder_len_variant == "0.11.0"
    assert rt.cross_attention_blocks(rt.create_vllm_config(max_num_batched_tokens=batched,
                                                           encoder_len_variant="0.13.0")) == blocks13
    assert rt.cross_attention_blocks(small_qwen(None), "0.13.0") == 0
