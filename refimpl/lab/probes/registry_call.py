"""Whisper's registry call alone (issue 48, W2): ``MULTIMODAL_REGISTRY.get_encdec_max_encoder_len``,
the call vLLM 0.10.2 made on every step (PR #24866 took it off the scheduler's step) and at every
admission (PR #24989), timed per call on one torch thread and on all of them, beside the bare HF
``WhisperProcessor`` call on the 30 s dummy audio the call builds (the part of it that is
transformers'). Host only: the call touches no device, so the figure is the host's."""
from __future__ import annotations

import os

import numpy as np
import torch

from refimpl.config import ModelConfig
from refimpl.lab.bench.schema import Result
from refimpl.lab.probes.common import result, timed, variant
from refimpl.lab.probes.specs import RegistryCallSpec
from refimpl.multimodal import MULTIMODAL_REGISTRY as REG
from refimpl.multimodal.whisper import build_hf_processor

__all__ = ["WAYS", "registry_call"]

WAYS = ("registry-1-thread", "registry-all-threads", "hf-processor")


def registry_call(spec: RegistryCallSpec) -> Result:
    """``calls`` registry calls on one torch thread, ``threaded_calls`` on ``os.cpu_count()`` threads,
    ``hf_calls`` bare HF processor calls (each after one untimed call); each run ``{"s"}`` (seconds per
    call), each way's summary median [min, max] and iqr (the spread). ``params``: ``encoder_len`` the
    call returned, ``registry_calls`` counted by the registry's stats (one per call made, untimed ones
    included: a check that the timed function is the counted one), ``threads`` of the second way.
    Restores torch's thread count."""
    spec.check()
    mc = ModelConfig(spec.model, device="cpu")
    hf = build_hf_processor(spec.model)
    fe = hf.feature_extractor
    audio = np.zeros(fe.chunk_length * fe.sampling_rate, dtype=np.float32)
    before, all_threads = torch.get_num_threads(), os.cpu_count() or 1
    REG.reset_stats()
    runs: dict[str, list[dict]] = {}
    try:
        for way, threads, n in (("registry-1-thread", 1, spec.calls), ("registry-all-threads", all_threads,
                                                                        spec.threaded_calls)):
            torch.set_num_threads(threads)
            runs[way] = [{"s": s} for s in timed(lambda: REG.get_encdec_max_encoder_len(mc), n)]
        torch.set_num_threads(1)
        runs["hf-processor"] = [{"s": s} for s in timed(
            lambda: hf(audio=[audio], sampling_rate=fe.sampling_rate, return_tensors="pt"), spec.hf_calls)]
    finally:
        torch.set_num_threads(before)
    return result(spec, {w: variant(r, ["s"]) for w, r in runs.items()},
                  encoder_len=REG.get_encdec_max_encoder_len(mc), registry_calls=REG.stats.encdec_calls,
                  threads=all_threads)
