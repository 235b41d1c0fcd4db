"""The start-up phases that isolate PR #17935's mechanism, from a start-up Result: per phase the
HF-processor, hashing and dummy-building seconds (``StartupReport.mm_seconds_by_phase``) and the rest;
the profile run's encoder forward alone beside ``profile_run``; and what a fresh process pays before
its start-up begins (``process_overhead_s``: interpreter and imports, refimpl/lab/bench/fresh.py)."""
from __future__ import annotations

from refimpl.engine.startup_report import MM_PARTS
from refimpl.lab.bench.schema import Result
from refimpl.lab.studies import md, md_table, spread
from refimpl.lab.studies.startup_tables import PHASE_ORDER, measured

NO_PHASE_PARTS = "No per-phase split of the multimodal work: these runs predate `mm_seconds_by_phase`."
PART_HEADERS = {"hf_processor_s": "HF processor s", "hash_s": "hashing s", "dummy_s": "dummy building s"}


def phase_parts(run: dict) -> dict[str, dict[str, float]]:
    """{phase: {"phase_s", MM_PARTS..., "rest_s"}} of one run, for the phases with multimodal work, in
    PHASE_ORDER; rest = the phase's seconds less its parts (>= 0 by construction)."""
    by = run.get("mm_seconds_by_phase") or {}
    out = {}
    for phase in (p for p in PHASE_ORDER if p in by and any(by[p].values())):
        parts = {k: by[phase][k] for k in MM_PARTS}
        out[phase] = {"phase_s": run["phases"][phase], **parts, "rest_s": run["phases"][phase] - sum(parts.values())}
    return out


def mechanism_table(res: Result) -> str:
    """Markdown per variant and phase with multimodal work: median [min, max] of the phase's seconds,
    each MM_PARTS entry and the rest; NO_PHASE_PARTS when no run records the split."""
    rows = []
    for v in measured(res):
        runs = [phase_parts(r) for r in res.runs(v) if "mm_seconds_by_phase" in r]
        for phase in (p for p in PHASE_ORDER if runs and p in runs[0]):
            vals = [r[phase] for r in runs if phase in r]
            rows.append([v, phase, *[spread([x[k] for x in vals]) for k in ("phase_s", *MM_PARTS, "rest_s")]])
    if not rows:
        return NO_PHASE_PARTS
    return md_table(["variant", "phase", "phase s", *PART_HEADERS.values(), "rest s"], rows)


def has_overhead(res: Result) -> bool:
    """Whether a run of ``res`` records ``process_overhead_s`` (fresh-process runs after issue 42)."""
    return any("process_overhead_s" in r for v in res.variants.values() for r in v["runs"])


def forward_and_overhead_table(res: Result) -> str:
    """Markdown per variant: ``profile_run`` s, its encoder forward alone, start-up s (``total_s``) and,
    where the runs record it, a fresh process's overhead before it (interpreter, bench imports)."""
    def col(runs: list[dict], get) -> str:
        xs = [x for x in map(get, runs) if x is not None]
        return spread(xs) if xs else "-"
    cols = [lambda r: r["phases"].get("profile_run"), lambda r: r.get("profile_encoder_forward_s"),
            lambda r: r.get("total_s")]
    head = ["variant", "profile_run s", "encoder forward alone s", "start-up s"]
    if has_overhead(res):
        cols += [lambda r: r.get("process_overhead_s"), lambda r: r.get("process_overhead", {}).get("interpreter_s"),
                 lambda r: r.get("process_overhead", {}).get("bench_imports_s")]
        head += ["process overhead s", "interpreter + worker imports s", "bench imports s"]
    return md_table(head, [[v, *[col(res.runs(v), get) for get in cols]] for v in measured(res)])


def mechanism_md(res: Result) -> str:
    """Both tables with a line on what they are (the start-up report's mechanism section)."""
    return md("Multimodal work per start-up phase (seconds; the parts are timed where the work runs, the "
              "rest is the phase's other work: model build, encoder and text forwards, KV cache):",
              mechanism_table(res),
              "The profile run's encoder forward alone ('-': runs that predate the field)"
              + (", and what each new process paid before its start-up began (interpreter and imports; "
                 "not in start-up s)" if has_overhead(res) else "") + ":",
              forward_and_overhead_table(res))
