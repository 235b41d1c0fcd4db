"""The committed start-up runs measured while EngineCore built its StartupPlan before the first phase
(2026-12-03 to issue 43) are named by the cost check: their total_s leaves out the HF processor build."""
from refimpl.lab.bench.schema import Result
from refimpl.lab.explore.cost_check import carries_plan_shift
from refimpl.lab.studies import REFERENCE, RESULTS_DIR

D = RESULTS_DIR / REFERENCE


def test_runs_of_the_plan_in_init_are_named():
    before = Result.load(D / "startup_qwen2.5-vl-3b_release-rows_50k.json")               # 2026-12-02
    during = Result.load(D / "startup_qwen2.5-vl-3b_release-rows_50k_2026-12-03.json")    # 2026-12-03 15:48
    assert not carries_plan_shift(before) and carries_plan_shift(during)
    # what the shift is: under a formula row runner_init held the processor build before, ~0 during
    ri = {name: min(r["phases"]["runner_init"] for r in res.runs("0.11.1")) for name, res in
          (("before", before), ("during", during))}
    assert ri["during"] < 0.01 < ri["before"]
    for run in during.runs("0.11.1"):  # a run measured by a fixed tree records EngineCore()'s wall
        run["engine_wall_s"] = run["total_s"]
    assert not carries_plan_shift(during)
