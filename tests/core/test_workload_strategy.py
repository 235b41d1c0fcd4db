"""The scheduler workloads reach preemption (the properties over random workloads are in
tests/core/test_scheduler_properties.py)."""
from __future__ import annotations

from refimpl.testing import WHISPER
from tests.core.utils import CROSS, Job, run_workload


def test_workload_strategy_reaches_preemption():
    """Guard against a vacuous property: a fixed tight workload does preempt."""
    jobs = [Job(0, 60, 0, None) for _ in range(4)]
    done, _, stats = run_workload(WHISPER, jobs, 1 + 2 * CROSS + 4)
    assert stats["preemptions"] > 0 and len(done) == 4
