"""One prediction of start-up seconds for one setting, read by everyone who prints one.

A setting is the full set of start-up settings (model or a local directory, max_model_len, item
limits, ``mm_processor_kwargs`` such as max_pixels, the processing cache's size); ``setting_config``
turns it into the one VllmConfig a prediction reads (small scale, CPU, nothing loaded), and
``predict_startup`` / ``predicted_ratio`` price that config's dry StartupPlan with a calibration
(refimpl/lab/explore/cost_model.py). The explorer, the regime sentence of ``refimpl bench startup``
and notebook 01, and the cost check all call these (tests/lab/explore/test_one_prediction.py feeds one
setting to each). A prediction, not a measurement: label it as one.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from refimpl.config import CacheConfig, SchedulerConfig, VllmConfig
from refimpl.engine.startup_plan import StartupPlan
from refimpl.lab.explore.cost_model import Calibration, Prediction, predict
from refimpl.lab.model_dir import model_config
from refimpl.variants import StartupVariant

AFTER, BEFORE = "0.9.0", "0.8.5"  # PR #17935's rows: the ratio the finding is about


def setting_config(model: str = "qwen2.5-vl-3b", *, max_model_len: Optional[int] = None,
                   limit_mm_per_prompt: Optional[Mapping[str, int]] = None,
                   mm_processor_kwargs: Optional[Mapping[str, Any]] = None, model_path: Optional[str] = None,
                   mm_processor_cache_gb: float = 4.0) -> VllmConfig:
    """The VllmConfig a prediction of this setting reads: small-scale CPU, SchedulerConfig and
    CacheConfig defaults, nothing loaded. Raises ConfigError naming a refused field."""
    mc = model_config(model, model_path=model_path, load_weights=False, max_model_len=max_model_len,
                      device="cpu", limit_mm_per_prompt=dict(limit_mm_per_prompt or {}),
                      mm_processor_kwargs=dict(mm_processor_kwargs or {}), mm_processor_cache_gb=mm_processor_cache_gb)
    return VllmConfig(mc, SchedulerConfig(), CacheConfig())


def spec_config(spec) -> VllmConfig:
    """``setting_config`` of a start-up spec (refimpl.lab.bench.specs.StartupSpec, or a stored
    Result's ``spec_from_params``): every setting it holds, pixels included."""
    return setting_config(spec.model, max_model_len=spec.max_model_len, limit_mm_per_prompt=spec.limit_mm_per_prompt,
                          mm_processor_kwargs=spec.mm_processor_kwargs, model_path=spec.model_path)


def predict_startup(vllm_config: VllmConfig, row: str | StartupVariant, cal: Calibration) -> Prediction:
    """The cost model's start-up of ``row`` at ``vllm_config`` (seconds by phase, peak RSS), priced
    with ``cal``. Raises UnknownVariantError for an unknown row."""
    return predict(StartupPlan.build(vllm_config, row), cal)


def predicted_ratio(vllm_config: VllmConfig, cal: Calibration, after: str = AFTER, before: str = BEFORE) -> float:
    """Predicted start-up seconds of ``after`` over ``before`` (default 0.9.0 / 0.8.5) at this config."""
    return predict_startup(vllm_config, after, cal).total_s / predict_startup(vllm_config, before, cal).total_s
