"""One builder of a config from a local HF directory (refimpl/lab/model_dir.py): the start-up bench
and the explorer build the same config for the same directory and settings."""
import dataclasses
import json

import pytest

from refimpl.config import get_config_dict
from refimpl.config.model import get_preprocessor_dict
from refimpl.errors import ConfigError
from refimpl.lab.bench.specs import StartupSpec
from refimpl.lab.bench.startup import make_vllm_config
from refimpl.lab.explore.explorer import Settings, vllm_config
from refimpl.lab.model_dir import local_model, preprocessor_overrides

QWEN = "qwen2.5-vl-3b"


@pytest.fixture
def qwen_dir(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(get_config_dict(QWEN)))
    shipped = get_preprocessor_dict(QWEN)
    pre = {**shipped, "max_pixels": 512 * 28 * 28, "image_processor_type": "Qwen2VLImageProcessorFast",
           "processor_class": "Other"}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(pre))
    (tmp_path / "model.safetensors").write_bytes(b"")  # the bench's run loads weights: one must be there
    return tmp_path


def test_the_bench_and_the_explorer_build_equal_configs_for_one_directory(qwen_dir):
    d = str(qwen_dir)
    bench = make_vllm_config(StartupSpec(model=QWEN, model_path=d, max_model_len=8192, device="cpu",
                                         limit_mm_per_prompt={"video": 0}, mm_processor_kwargs={"min_pixels": 3136}))
    explorer = vllm_config(Settings(model_path=d, max_model_len=8192, limit_mm_per_prompt={"video": 0},
                                    min_pixels=3136))
    # the directory's preprocessor setting that differs, class names left out, then the flag's
    assert bench.model_config.mm_processor_kwargs == {"max_pixels": 512 * 28 * 28, "min_pixels": 3136}
    # the bench's run loads the directory's weights, the explorer plans from the configs alone
    assert (bench.model_config.load_format, explorer.model_config.load_format) == ("hf", "dummy")
    assert dataclasses.replace(explorer, model_config=dataclasses.replace(explorer.model_config, load_format="hf")) \
        == bench
    assert explorer.model_config.model_path == bench.model_config.model_path == d


def test_a_local_directory_names_its_family_and_its_overrides(qwen_dir, tmp_path_factory):
    assert local_model(qwen_dir) == QWEN
    assert preprocessor_overrides(QWEN, qwen_dir) == {"max_pixels": 512 * 28 * 28}
    other = tmp_path_factory.mktemp("other")
    (other / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (other / "preprocessor_config.json").write_text("{}")
    with pytest.raises(ConfigError) as e:
        local_model(other)
    assert e.value.field == "model_path"
