"""The front end's (P0's) half of the two-process engine: mirror, in-flight requests, reset.

In vLLM 0.9.0 these sit in ``Processor`` (``mm_input_cache_client``), ``OutputProcessor`` and
``LLMEngine.reset_mm_cache`` (called at the end of ``__init__``); ``MPFrontend`` puts them
behind the interface LLMEngine uses for an in-process EngineCore. ``startup_memory``: both
processes' cache bytes and RSS around that first reset.
"""
from __future__ import annotations

import os
import time
from typing import Optional

from refimpl.engine.mp.core_client import SyncMPClient
from refimpl.engine.mp.core_proc import RESET_SCOPES, EngineCoreRequest
from refimpl.engine.mp.mm_input_cache import MIRROR_FAULTS, MirroredProcessingCache
from refimpl.errors import ConfigError, EngineStateError, InvalidInputError
from refimpl.utils.mem_utils import rss_bytes
from refimpl.variants import get_startup_variant


class MPFrontend:
    """P0: a MirroredProcessingCache client and a SyncMPClient; ``reset_scope`` None: the row's.
    Raises ConfigError for an unknown reset_scope / mirror_fault, EngineDeadError."""

    def __init__(self, vllm_config, variant: str, reset_scope: Optional[str] = None,
                 mirror_fault: Optional[str] = None):
        reset_scope = reset_scope or get_startup_variant(variant).reset_scope  # the row's by default
        if reset_scope not in RESET_SCOPES:
            raise ConfigError("reset_scope", RESET_SCOPES, f"got {reset_scope!r}")
        if mirror_fault not in MIRROR_FAULTS:
            raise ConfigError("mirror_fault", MIRROR_FAULTS, f"got {mirror_fault!r}")
        mc = vllm_config.model_config
        self.mm_registry, self.mirror_fault = vllm_config.get_mm_registry(), mirror_fault
        mirror = dict(capacity_bytes=mc.mm_cache_bytes, use_cache=not mc.disable_mm_preprocessor_cache,
                      fault=mirror_fault)
        self.mm_input_cache_client = MirroredProcessingCache.for_p0(**mirror)
        self.client = SyncMPClient(vllm_config, variant, reset_scope=reset_scope, mirror=mirror)
        self.report = self.client.startup_report
        self._in_flight: set[str] = set()
        before = self.memory_stats()
        t0 = time.perf_counter()
        if get_startup_variant(variant).reset_at_end:
            self.reset_mm_cache()
        self.report.phases["reset_mm_cache_p0"] = time.perf_counter() - t0
        self.startup_memory = two_process_memory(before, self.memory_stats())

    # -- LLMEngine's interface -------------------------------------------------------------
    def add_request(self, req) -> None:
        """Send a processed Request; items P1 holds go as their hash alone. Raises InvalidInputError for
        an id in flight; the engine core's own refusals come back from ``step``."""
        if req.request_id in self._in_flight:
            raise InvalidInputError("request_id", "unique", f"{req.request_id!r} is in flight")
        mm_inputs = self.mm_input_cache_client.get_and_update_p0(req.mm_inputs, req.mm_hashes)
        self.client.add_request(EngineCoreRequest(
            req.request_id, list(req.prompt_token_ids), mm_inputs, list(req.mm_hashes),
            req.sampling_params, req.arrival_time, req.external_req_id))
        self._in_flight.add(req.request_id)

    def abort_requests(self, request_ids: list[str]) -> None:
        ids = [r for r in request_ids if r in self._in_flight]
        self._in_flight.difference_update(ids)
        self.client.abort_requests(ids)

    def has_unfinished_requests(self) -> bool:
        return bool(self._in_flight)

    def step(self) -> list:
        """Outputs of the requests that finished in the engine core's next step (those no longer in
        flight dropped). Raises the RefimplError of a refused request, ``request_id`` set."""
        if not self._in_flight:
            return []
        kind, *rest = self.client.get_output()
        if kind == "REJECTED":
            rid, err = rest
            if rid not in self._in_flight:
                return []
            self._in_flight.discard(rid)
            err.request_id = rid
            raise err
        outs = [o for o in rest[0] if o.request_id in self._in_flight]
        self._in_flight.difference_update(o.request_id for o in outs)
        return outs

    def reset_mm_cache(self) -> None:
        """P0's processing cache, P0's mirror (not under fault reset-p1-only), then P1."""
        if self._in_flight:
            raise EngineStateError("reset_mm_cache", "no unfinished requests",
                                   f"{len(self._in_flight)} requests in flight")
        self.mm_registry.reset_processor_cache()
        if self.mirror_fault != "reset-p1-only":
            self.mm_input_cache_client.reset()
        self.client.reset_mm_cache()

    def memory_stats(self) -> dict:
        """{"p0": {...}, "p1": {...}}: pid, cache_bytes, rss (bytes), mirror counters."""
        p0 = dict(pid=os.getpid(), cache_bytes=self.mm_registry.cache_bytes(), rss=rss_bytes(),
                  mirror=self.mm_input_cache_client.stats())
        return {"p0": p0, "p1": self.client.call_utility("memory_stats")}

    def mirrors_agree(self) -> bool:
        """Both mirrors hold the same hashes in the same LRU order."""
        return self.mm_input_cache_client.keys() == self.client.call_utility("mirror_keys")

    @property
    def pid(self) -> int:
        return self.client.pid

    def shutdown(self) -> None:
        self.client.shutdown()


def two_process_memory(before: dict, after: dict) -> dict:
    """Flat record of memory_stats before / after the reset: ``p0_cache_bytes_before_reset``,
    ``p1_rss_after_reset``, ... (bytes)."""
    out = {}
    for proc in ("p0", "p1"):
        for key in ("cache_bytes", "rss"):
            out[f"{proc}_{key}_before_reset"] = before[proc][key]
            out[f"{proc}_{key}_after_reset"] = after[proc][key]
    return out
