"""StartupReport: what one ``EngineCore`` start-up did, and the per-phase snapshot of the registry's
counters that fills it (``PhaseMeter``).

Ours (vLLM logs its start-up phases; it keeps no record). The per-phase seconds of the multimodal
work (``MM_PARTS``) are differences of the counters ``ProcessingStats`` already keeps (each HF pass,
content hash and dummy build is timed where it runs, refimpl/multimodal/processing.py and
profiling.py), read at each phase's edges: no timer is added inside the mechanism. The parts are
disjoint, so per phase they sum to no more than the phase's seconds.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

# ProcessingStats' seconds per part of the multimodal work that a phase's seconds hold:
# the HF processor's passes (with or without items), content hashes, dummy-input builds
MM_PARTS: tuple[str, ...] = ("hf_processor_s", "hash_s", "dummy_s")


@dataclass
class StartupReport:
    """What one start-up did: seconds per phase (``phases``, CHECK_PHASE first), ``wall_s`` (the
    seconds of ``EngineCore()`` from entry to return, which the phases cover), HF-processor passes
    per PHASES entry, cache figures (bytes).

    ``mm_seconds_by_phase``: per phase, seconds of each MM_PARTS entry spent in it (sum <= the
    phase's seconds). ``profile_encoder_forward_s``: the profile run's encoder forward alone
    (seconds, synchronised on CUDA; 0.0 when the profile run encodes nothing), part of
    ``phases["profile_run"]``, which also holds the dummy build, its HF pass and the text dummy run."""
    variant: str
    phases: dict[str, float] = field(default_factory=dict)
    hf_processor_calls: int = 0
    hf_mm_passes: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    cache_bytes_before_reset: int = 0
    cache_bytes_after_reset: int = 0
    rss_before_reset: int = 0
    rss_after_reset: int = 0
    peak_rss_bytes: int = 0
    encoder_compute_budget: int = 0
    encoder_cache_size: int = 0
    num_gpu_blocks: int = 0
    max_tokens_per_item: dict[str, int] = field(default_factory=dict)
    profile_tokens_per_item: int = 0
    profile_encoder_tokens: int = 0
    passes_by_phase: dict[str, int] = field(default_factory=dict)
    cache_bytes_by_phase: dict[str, int] = field(default_factory=dict)  # held after each phase
    wall_s: float = 0.0
    mm_seconds_by_phase: dict[str, dict[str, float]] = field(default_factory=dict)
    profile_encoder_forward_s: float = 0.0

    @property
    def plan_mismatches(self) -> None:
        """Deprecated (after 0.2.0): the engine no longer checks itself against its StartupPlan while it
        starts; always None ("not checked"). Check a report with ``StartupPlan.build(cfg, row).mismatches(report)``."""
        warnings.warn("StartupReport.plan_mismatches is always None: EngineCore no longer checks its start-up "
                      "against a StartupPlan; use StartupPlan.build(vllm_config, row).mismatches(report) (the field goes in 0.4.0)",
                      DeprecationWarning, stacklevel=2)
        return None

    @property
    def total_s(self) -> float:
        """Seconds of the named phases (within 2% of ``wall_s`` on a small setting: tests/engine/test_startup_wall.py)."""
        return sum(self.phases.values())


class PhaseMeter:
    """One phase's edges: ``start()`` reads the registry's counters, ``stop(report, name)`` writes the
    phase's seconds, HF passes with items, MM_PARTS seconds and the cache bytes held after it."""

    def __init__(self, registry):
        self.registry = registry

    def start(self) -> None:
        stats = self.registry.stats
        self.passes0, self.parts0 = stats.hf_mm_passes, [getattr(stats, k) for k in MM_PARTS]
        self.t0 = time.perf_counter()

    def stop(self, report: StartupReport, name: str) -> None:
        report.phases[name] = time.perf_counter() - self.t0
        stats = self.registry.stats
        report.passes_by_phase[name] = stats.hf_mm_passes - self.passes0
        report.mm_seconds_by_phase[name] = {k: getattr(stats, k) - v0 for k, v0 in zip(MM_PARTS, self.parts0)}
        report.cache_bytes_by_phase[name] = self.registry.cache_bytes()
