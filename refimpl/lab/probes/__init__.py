"""Probes: the one-off measurements the docs cite (first-touch cost, two-process spawn cost,
cross-attention reads, cache-hit cost, engine against generate(), step ops, serving memory, the
explorer page's ready time, the registry call, the encoder by batch), each a spec (probes/specs.py, the flags of ``refimpl probe NAME``), a
function returning a Result in the one schema (bench/schema.py, ``bench`` the probe's name) and a
test (tests/lab/probes/test_probes.py)."""
from __future__ import annotations

import importlib
from typing import Callable

from refimpl.lab.probes.specs import (
    CacheHitSpec,
    CrossAttentionFragmentationSpec,
    CrossAttentionReadSpec,
    EncoderBatchSpec,
    EngineVsGenerateSpec,
    ExplorerReadySpec,
    FirstTouchSpec,
    ProbeSpec,
    RegistryCallSpec,
    ServingMemorySpec,
    SpawnCostSpec,
    StepOpsSpec,
)

__all__ = ["PROBES", "probe_function"]

# name: (spec, "module:function" under refimpl.lab.probes; imported on use: the functions import torch)
PROBES: dict[str, tuple[type[ProbeSpec], str]] = {
    "first-touch": (FirstTouchSpec, "memory:first_touch"),
    "spawn-cost": (SpawnCostSpec, "spawn:spawn_cost"),
    "cache-hit": (CacheHitSpec, "cache_hit:cache_hit"),
    "cross-attention-read": (CrossAttentionReadSpec, "cross_attention:read"),
    "cross-attention-fragmentation": (CrossAttentionFragmentationSpec, "cross_attention:fragmentation"),
    "engine-vs-generate": (EngineVsGenerateSpec, "engine:engine_vs_generate"),
    "step-ops": (StepOpsSpec, "engine:step_ops"),
    "registry-call": (RegistryCallSpec, "registry_call:registry_call"),
    "serving-memory": (ServingMemorySpec, "memory:serving_memory"),
    "explorer-ready": (ExplorerReadySpec, "explorer_ready:explorer_ready"),
    "encoder-batch": (EncoderBatchSpec, "encoder_batch:encoder_batch"),
}


def probe_function(name: str) -> Callable:
    """The function of probe ``name`` (spec -> Result). KeyError for an unknown name."""
    module, func = PROBES[name][1].split(":")
    return getattr(importlib.import_module(f"refimpl.lab.probes.{module}"), func)
