"""Results built from the committed ones, with chosen runs per variant (tests/lab/studies/test_analysis_partial.py, tests/lab/studies/test_analysis_partial_startup.py)."""
import copy

from refimpl.lab.bench.schema import Result
from refimpl.lab.env import REPO_ROOT

STORED = REPO_ROOT / "results/cpu-amd-epyc-2c"


def _with_runs(name: str, runs_of: dict[str, int], **params) -> Result:
    """The committed ``name`` with ``runs_of[variant]`` runs per variant (copies of its runs)."""
    res = Result.load(STORED / name)
    variants = {}
    for v, n in runs_of.items():
        src = res.runs(v)
        variants[v] = {"runs": [copy.deepcopy(src[i % len(src)]) for i in range(n)], "summary": {}}
    return Result(res.bench, res.env, {**res.params, **params}, variants)


def _row(md: str, start: str) -> str:
    return next(ln for ln in md.splitlines() if ln.startswith(f"| {start}"))
