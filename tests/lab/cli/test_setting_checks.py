"""Every setting's bad values refused identically at every entry point (issue 29, kind 6).

The rules live in refimpl/config/checks.py; ModelConfig (the Python API, the engine, the
oracles), the bench guard (the CLI), the explorer, the report's ``-p`` parameters,
ProcessingCache and ``create_requests`` call them. For each bad value every entry point that
takes the setting raises ConfigError with the same field and limit, before anything runs.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from refimpl.config import ModelConfig, get_config_dict, get_preprocessor_dict
from refimpl.errors import ConfigError
from refimpl.lab.bench import guard
from refimpl.lab.cli import parse
from refimpl.lab.explore import explorer
from refimpl.multimodal.cache import ProcessingCache
from refimpl.testing import create_requests, create_vllm_config, max_tokens_per_item

QWEN = "qwen2.5-vl-3b"


def _cli(kw: dict) -> None:
    argv = ["bench", "startup", "--model", QWEN, "--max-model-len", "8192"]
    if kw:
        argv += ["--mm-processor-kwargs", *[str(x) for k, v in kw.items() for x in (k, v)]]
    guard.check(parse(argv[1:])[0])


PIXEL_ENTRIES = {
    "ModelConfig": lambda kw: ModelConfig(QWEN, mm_processor_kwargs=kw),
    "create_vllm_config": lambda kw: create_vllm_config(QWEN, mm_processor_kwargs=kw),
    "oracle max_tokens_per_item": lambda kw: max_tokens_per_item(QWEN, mm_processor_kwargs=kw),
    "CLI refimpl bench startup": _cli,
    "explorer": lambda kw: explorer.vllm_config(explorer.Settings(model=QWEN, **kw)),
}
BAD_PIXELS = [{"max_pixels": -5}, {"max_pixels": 0}, {"max_pixels": 10}, {"min_pixels": 2_000_000, "max_pixels": 1_003_520},
              {"min_pixels": 20_000_000}, {"min_pixels": -1}]


def _refusal(fn, arg) -> tuple:
    with pytest.raises(ConfigError) as e:
        fn(arg)
    return type(e.value).__name__, e.value.field, e.value.limit


@pytest.mark.parametrize("kw", BAD_PIXELS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_pixel_settings_refused_alike_at_every_entry_point(kw):
    got = {name: _refusal(fn, kw) for name, fn in PIXEL_ENTRIES.items()}
    assert len(set(got.values())) == 1, got


@pytest.mark.parametrize("kw", [{"max_pixels": 1.5e6}, {"patch_size": 0}, {"temporal_patch_size": -2},
                                {"merge_size": "2"}, {"no_such_key": 1}])
def test_other_processor_settings_refused_alike(kw):
    # the explorer has pixel controls only; the CLI's flag takes ints (tyro refuses others, exit 2)
    entries = {k: v for k, v in PIXEL_ENTRIES.items() if k != "explorer"
               and (k != "CLI refimpl bench startup" or all(type(x) is int for x in kw.values()))}
    got = {name: _refusal(fn, kw) for name, fn in entries.items()}
    assert len(set(got.values())) == 1, got


@pytest.mark.parametrize("gb", [-1.0, math.nan, math.inf])
def test_cache_size_refused_alike(gb):
    got = {"ModelConfig": _refusal(lambda v: ModelConfig(QWEN, mm_processor_cache_gb=v), gb),
           "oracle": _refusal(lambda v: max_tokens_per_item(QWEN, mm_processor_cache_gb=v), gb),
           "explorer": _refusal(lambda v: explorer.vllm_config(explorer.Settings(mm_processor_cache_gb=v)), gb)}
    assert len(set(got.values())) == 1, got
    assert _refusal(ProcessingCache, gb * (1 << 30))[1:] == ("capacity_bytes", ">= 0 (a finite number)")


@pytest.mark.parametrize("n", [-5, -1])
def test_processing_cache_and_request_counts(n):
    assert _refusal(ProcessingCache, n)[1] == "capacity_bytes"
    assert _refusal(create_requests, n)[1:] == ("num_requests", ">= 0 (an int)")


@pytest.mark.parametrize("frames", [0, -3, 2.5])
def test_frames_refused(frames):
    assert _refusal(lambda f: explorer.vllm_config(explorer.Settings(frames=f)), frames)[1:] == ("frames", ">= 1 (an int)")


@pytest.mark.parametrize("limit", [{"image": -1}, {"audio": 1}])
def test_limit_mm_per_prompt_refused_alike(limit):
    got = {"ModelConfig": _refusal(lambda v: ModelConfig(QWEN, limit_mm_per_prompt=v), limit),
           "oracle": _refusal(lambda v: max_tokens_per_item(QWEN, limit_mm_per_prompt=v), limit),
           "explorer": _refusal(lambda v: explorer.vllm_config(explorer.Settings(limit_mm_per_prompt=v)), limit)}
    assert len(set(got.values())) == 1, got


@pytest.mark.parametrize("value", ["-1", "0", "2.5", "'three'"])
def test_report_count_parameters_refused(value):
    pytest.importorskip("papermill")
    from refimpl.lab import report
    nbs = report.select_notebooks(None)
    with pytest.raises(ConfigError) as e:
        report.notebook_params(nbs, [f"REPEATS={value}"])
    assert (e.value.field, e.value.limit) == ("REPEATS", ">= 1 (an int)")
    assert report.notebook_params(nbs, ["REPEATS=2"])  # a good value passes


@pytest.fixture
def configs_only(tmp_path: Path) -> Path:
    """A Qwen2.5-VL directory with config.json and preprocessor_config.json but no weights."""
    (tmp_path / "config.json").write_text(json.dumps(get_config_dict(QWEN)))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(get_preprocessor_dict(QWEN)))
    return tmp_path


def test_model_dir_without_weights_refused_where_a_run_loads_them(configs_only):
    limit = "a directory with weights (*.safetensors, pytorch_model*.bin, model.bin) for a run that loads them"
    cli = _refusal(lambda p: guard.check(parse(["startup", "--model", QWEN, "--model-path", str(p)])[0]), configs_only)
    api = _refusal(lambda p: ModelConfig(QWEN, load_format="hf", model_path=str(p)), configs_only)
    assert cli == api == ("ConfigError", "model_path", limit)
    # the explorer plans start-up from the two configs and loads no weights: accepted
    assert explorer.vllm_config(explorer.Settings(model_path=str(configs_only))).model_config.model == QWEN
    (configs_only / "model.safetensors").write_bytes(b"")
    guard.check(parse(["startup", "--model", QWEN, "--model-path", str(configs_only), "--max-model-len", "8192"])[0])
