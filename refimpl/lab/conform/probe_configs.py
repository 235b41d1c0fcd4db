"""The conformance probe's vLLM configs (probe.py, beside it, imports this file by its folder: both
run INSIDE vLLM's interpreter and import nothing of refimpl): ``ModelConfig``, ``SchedulerConfig``
and ``VllmConfig`` of a setting, built with only the keywords the installed release accepts.
"""
from __future__ import annotations

import inspect


def _kwargs_for(cls, kw: dict) -> dict:
    """The keywords ``cls`` accepts (a field that became init-only or moved is left out)."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return kw
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return kw
    return {k: v for k, v in kw.items() if k in params}


def model_config(path: str, s: dict):
    from vllm.config import ModelConfig
    kw = dict(model=path, tokenizer=path, max_model_len=s["max_model_len"], dtype="float32",
              seed=0, trust_remote_code=False, task="auto", tokenizer_mode="auto")  # 0.8.5 requires both
    if s.get("disable_mm_preprocessor_cache"):
        kw["disable_mm_preprocessor_cache"] = True
    if "limits" in s:
        kw["limit_mm_per_prompt"] = s["limits"]
    if s.get("max_pixels"):
        kw["mm_processor_kwargs"] = {"max_pixels": s["max_pixels"]}
    return ModelConfig(**_kwargs_for(ModelConfig, kw))


def scheduler_config(mc, s: dict):
    from vllm.config import SchedulerConfig
    kw = dict(max_num_batched_tokens=s["max_num_batched_tokens"], max_num_seqs=s["max_num_seqs"],
              max_model_len=mc.max_model_len, is_encoder_decoder=mc.is_encoder_decoder,
              enable_chunked_prefill=not mc.is_encoder_decoder)  # V1's default for decoder-only
    sc = SchedulerConfig(**_kwargs_for(SchedulerConfig, kw))
    for k in ("max_model_len", "is_encoder_decoder"):  # init-only from 0.11.1
        if hasattr(sc, k) and getattr(sc, k) != kw[k]:
            try:
                setattr(sc, k, kw[k])
            except Exception:  # noqa: BLE001
                pass
    return sc


def vllm_config(mc, s: dict):
    from vllm.config import CacheConfig, DeviceConfig, VllmConfig
    from vllm.platforms import current_platform
    sc = scheduler_config(mc, s)
    cc = CacheConfig(**_kwargs_for(CacheConfig, dict(block_size=s["block_size"], swap_space=0)))
    # no GPU: the platform's config check is stubbed, and (0.10.2) its async-output query
    cls = type(current_platform)
    if hasattr(cls, "check_and_update_config"):
        cls.check_and_update_config = classmethod(lambda cls, c: None)
    if hasattr(cls, "is_async_output_supported"):
        cls.is_async_output_supported = classmethod(lambda cls, enforce_eager: False)
    kw = dict(model_config=mc, scheduler_config=sc, cache_config=cc, device_config=DeviceConfig(device="cpu"))
    return VllmConfig(**_kwargs_for(VllmConfig, kw))
