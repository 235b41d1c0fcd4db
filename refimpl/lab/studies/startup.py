"""The start-up study (vLLM PR #17935) of notebook 01: ``StartupStudy``, its figures and summary
(tables: startup_tables.py; summary.md's section: startup_summary.py), the real-photo pass
(startup_photos.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Optional

from refimpl.lab.bench import guard
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import StartupSpec, parse_limits
from refimpl.lab.bench.startup import summarize_two_process
from refimpl.lab.stats import median
from refimpl.lab.studies import (
    REFERENCE,
    Shown,
    Study,
    flamegraph,
    md_table,
    provenance,
)
from refimpl.lab.studies import gpu as G
from refimpl.lab.studies import startup_tables as T
from refimpl.lab.studies.startup_figures import budget_figure, ladder_figure, phases_figure  # noqa: F401
from refimpl.lab.studies.startup_photos import photos_demo
from refimpl.lab.studies.startup_regime import (  # noqa: F401  (the notebooks' and tests' names)
    CROSSOVER_SIZES,
    QUICK_LIMITS,
    QUICK_MIN_RATIO,
    QUICK_REPEATS,
    QUICK_SIZES,
    predicted_ratio,
    quick_setting,
    quick_size,
    quick_variants,
    regime,
    regime_sentence,
    reversal_line,
    size,
)
from refimpl.lab.studies.startup_summary import budget_md, budget_pair, summary_md  # noqa: F401
from refimpl.lab.studies.startup_tables import AFTER, BEFORE, budget_table, call1_ratio, medians_table
from refimpl.variants import LADDER

# two processes (full mode): both reset scopes of AFTER at the smallest dummy video (the same up to ~32k
# tokens; the mechanism is the same)
TWO_PROCESS_SCOPES, TWO_PROCESS_REPEATS, TWO_PROCESS_MAX_MODEL_LEN = ("v0.9.0", "all"), 2, 8192
# full mode's flame-graphed (untimed) start-ups: the release before and after #17935, whose profiles tell
# the story (0.9.0's hashing); every run is a fresh process, so the first flame start-up is the warm-up of
# the files all of them read. Every row's flame graph: -p FLAME_VARIANTS=None. Two rows, 2 ladder repeats and 2 budget processes a side keep make report within its hour
# on a slow day of the 2-core VM (2026-12-03: 0.8.5 took 101 s, 0.9.0 158 s at 128k).
FLAME_VARIANTS = ("0.8.5", "0.9.0")
RECORDED = ("hf_mm_passes", "passes_by_phase", "encoder_compute_budget", "encoder_cache_size",
            "max_tokens_per_item")  # per variant, from its first run


@dataclass
class StartupStudy(Study):
    """Notebook 01: a flame-graphed (untimed) start-up per variant of ``flame_variants``, ``repeats`` fresh-process
    start-ups each, ``budget_repeats`` of the budget experiment. QUICK: QUICK_* on ``quick_variants``,
    one flame graph. A ratio is shown from ``min_n`` runs a side."""
    values_name: ClassVar[str] = "values_startup.json"
    model: str = "qwen2.5-vl-3b"
    device: str = "auto"
    repeats: int = 2
    budget_repeats: int = 2
    flame_rate: int = 20
    flame_variants: Optional[tuple[str, ...]] = FLAME_VARIANTS  # None: every variant
    max_model_len: Optional[int] = None
    limits: list[str] = field(default_factory=list)
    mm_processor_kwargs: dict[str, int] = field(default_factory=dict)
    numpy_hugepage: str = "off"
    variants: tuple[str, ...] = LADDER
    min_n: int = 2
    flames: dict = field(default_factory=dict, init=False, repr=False)  # the cells' results, in order
    res: Result = field(init=False, repr=False)

    def __post_init__(self):
        super().__post_init__()
        if self.quick:
            self.repeats = self.budget_repeats = QUICK_REPEATS
            self.variants = quick_variants()
            q = None if self.max_model_len or self.limits else quick_setting(self.model)
            if q is not None:  # the committed setting where the finding held (not the cost model's choice)
                self.max_model_len, self.limits = q.max_model_len, list(q.limits)
                self.mm_processor_kwargs = self.mm_processor_kwargs or dict(q.mm_processor_kwargs)
            else:  # no committed results (an installed wheel), or a size / limits given: the cost model
                self.limits = list(self.limits) or list(QUICK_LIMITS)
                self.max_model_len = self.max_model_len or quick_size(self.model, tuple(self.limits))

    def spec(self, variants: Optional[tuple[str, ...]] = None) -> StartupSpec:
        """The start-up bench's spec (no warm-up of its own: ``flamegraphs`` is it)."""
        return StartupSpec(model=self.model, device=self.device, variants=variants or self.variants,
                           repeats=self.repeats, warmup=False, max_model_len=self.max_model_len,
                           numpy_hugepage=self.numpy_hugepage, limit_mm_per_prompt=parse_limits(self.limits),
                           mm_processor_kwargs=dict(self.mm_processor_kwargs))

    def flamegraphs(self) -> dict[str, Optional[Path]]:
        """``flame_startup_<variant>.svg`` per variant of ``flame_variants`` that is measured (QUICK: the
        last variant; stored: none), or None."""
        spec, out = self.spec(), {}
        full = [v for v in self.variants if self.flame_variants is None or v in self.flame_variants]
        for v in [] if self.mode == "stored" else self.variants[-1:] if self.quick else full or self.variants[:1]:
            guard.wait_for_memory(spec, v)
            out[v] = flamegraph(spec, v, self.out_dir, f"flame_startup_{v}", speedscope=False,
                                rate=self.flame_rate)
        return out

    def startup(self) -> Result:
        """The ladder: ``startup_<model>.json``; records its values."""
        res = self.obtain(f"startup_{self.model}.json", self.spec())
        first = {v: res.runs(v)[0] for v in T.measured(res)}
        self.record(startup={
            "provenance": provenance(res), "size": size(res), "in_process": res.env.get("in_process", False),
            "runs": {v: len(r["runs"]) for v, r in res.variants.items()},
            **{k: {v: x.get(k) for v, x in first.items()} for k in RECORDED},
            "total_s_median": {v: median(res.values(v, "total_s")) for v in first},
            "ratios": T.ratios(res, self.min_n), "ratio_of": T.time_key(res),
            "finding": f"{AFTER} / {BEFORE}",
            "hashing": T.hashing_share(res) if T.has_parts(res) else None,
            **({"regime": regime(res, self.hardware)} if self.mode != "stored" else {})})
        return res

    def regime_md(self, res: Result) -> str:
        """``regime_sentence`` of a run measured here (stored mode shows the full run itself: '')."""
        return "" if self.mode == "stored" else regime_sentence(res, self.hardware)

    def budget(self, calls: int = 2) -> Result:
        """The reviewer's experiment, ``calls`` budget calls per process: ``budget_<model>.json``."""
        spec = self.spec((BEFORE, AFTER)).replace(repeats=self.budget_repeats, calls=calls)
        res = self.obtain(f"budget_{self.model}.json", spec)
        self.record(budget={"provenance": provenance(res), "size": size(res),
                            "passes": {v: res.runs(v)[0]["passes"] for v in T.measured(res)},
                            "budgets": {v: res.runs(v)[0]["budgets"] for v in T.measured(res)},
                            "call1_ratio": call1_ratio(res, min_n=self.min_n)})
        return res

    def release_ladder(self) -> str:
        """The committed release-row ladder of ``hardware`` (``startup_<model>_release-rows.json``, the README's
        table), as summary.md shows it, in every mode; its medians and ratios recorded."""
        name = f"startup_{self.model}_release-rows.json"
        if (res := self.stored(name)) is None:
            return f"No release-row ladder committed in results/{self.hardware}."
        self.record(release_rows={"file": f"results/{self.hardware}/{name}", "provenance": provenance(res),
                                  "total_s_median": {v: median(res.values(v, "total_s")) for v in T.measured(res)},
                                  "ratios": T.ratios(res, self.min_n), "ratio_of": T.time_key(res)})
        return f"From `results/{self.hardware}/{name}`.\n\n" + summary_md(res)

    def ladder_section(self) -> Shown:
        """The flame-graphed warm-up start-ups, then the ladder (``startup``): its figure."""
        self.flames = self.flamegraphs()
        self.res = self.startup()
        return Shown([ladder_figure(self.res, self.out_dir)])

    def phases_section(self) -> Shown:
        """The ladder's medians, ratios, regime, parts and hashing sentence; the phases figure."""
        res = self.res
        return Shown([medians_table(res), T.ratios_table(res, self.min_n), self.regime_md(res), T.parts_table(res),
                      T.hashing_sentence(res), phases_figure(res, self.out_dir)])

    def passes_section(self) -> Shown:
        return Shown([T.passes_table(self.res)])

    def gpu_section(self) -> Shown:
        """The committed GPU start-ups (``results/gpu-*/``) beside this machine's release-row ladder."""
        cpu = REFERENCE if self.hardware.startswith("gpu-") else self.hardware
        self.record(gpu_startup=G.startup_rows(self.model, cpu))
        return Shown([G.startup_md(self.model, cpu)])

    def release_section(self) -> Shown:
        return Shown([self.release_ladder()])

    def budget_section(self) -> Shown:
        """The reviewer's experiment (``budget``): each call's seconds, call 1's ratio explained, the figure."""
        budget = self.budget()
        out = Shown([budget_table(budget), T.parts_table(budget)])
        r = self.values["budget"]["call1_ratio"]
        if r and r["estimate"] is not None:
            out.append(f"Call 1, {AFTER} / {BEFORE}: **{r['estimate']:.2f}** [{r['low']:.2f}, {r['high']:.2f}] "
                       f"(95% CI, {r['state']}), min-max ranges {'overlap' if r['ranges_overlap'] else 'apart'}.")
        return Shown([*out, T.call1_explained(budget), budget_figure(budget, self.out_dir)])

    def flames_section(self) -> Shown:
        """The flame graphs of ``ladder_section``'s warm-up start-ups (none in stored mode)."""
        out = Shown([] if self.flames else [f"No flame graphs in {self.mode} mode."])
        for v, p in self.flames.items():
            out += [f"**{v}**: `{p}`", p] if p else [f"**{v}**: py-spy could not record here (missing or not permitted)"]
        return out

    def photos_section(self) -> Shown:
        """Real photos and a video through the processor twice (``photos_demo``; not in stored mode)."""
        if self.mode == "stored":
            return Shown(["Stored mode: the photo pass runs in quick and full mode."])
        photos = photos_demo(self.model)
        self.record(photos={k: photos[k] for k in ("pass1", "pass2", "identical", "tokens")})
        return Shown([md_table(["pass", "seconds", "cache hits", "cache misses", "HF mm passes"], [
            [k, photos[k]["s"], photos[k]["hits"], photos[k]["misses"], photos[k]["hf_mm_passes"]]
            for k in ("pass1", "pass2")]), f"Photos: {photos['photos']} | prompt tokens: {photos['tokens']} | "
            f"outputs identical: {photos['identical']}"])

    def reference_section(self) -> Shown:
        """Beside a run measured here, the committed ladder of ``hardware``: its ratios and figure."""
        if self.mode == "stored":
            return Shown([f"Stored mode: the sections above are `results/{self.hardware}/`."])
        if (ref := self.stored(f"startup_{self.model}.json")) is None:
            return Shown([f"No committed ladder of {self.model} in `results/{self.hardware}/`."])
        return Shown([T.ratios_table(ref, self.min_n), ladder_figure(ref, self.out_dir, "reference_startup_ladder")])

    def two_process_section(self) -> Shown:
        """Both reset scopes' cache and RSS per process (``two_process``), and where each row comes from."""
        tp = self.two_process()
        return Shown([T.memory_table(tp) if tp else "No two-process runs for this model.",
                      "\n".join(f"* {row}: `{r['_path']}`" for row, r in tp.items())])

    def two_process(self, repeats: int = TWO_PROCESS_REPEATS,
                    max_model_len: int = TWO_PROCESS_MAX_MODEL_LEN) -> dict[str, dict]:
        """{row label: {"runs", "_path"}} of both reset scopes: full mode's runs, measured here, then the
        committed ones of ``hardware``."""
        rows: dict[str, dict] = {}
        names = {scope: f"twoproc_startup_{self.model}_{scope}.json" for scope in TWO_PROCESS_SCOPES}
        for scope, name in names.items() if self.mode == "full" else ():
            spec = StartupSpec(model=self.model, device=self.device, variants=(AFTER,), repeats=repeats,
                               warmup=False, max_model_len=max_model_len, process_mode="mp",
                               reset_scope=scope, limit_mm_per_prompt=parse_limits(self.limits))
            path = f"{self.out_dir / name}, command: {spec.command(output_json=name)}"
            rows[f"{scope} (this run)"] = {"runs": self.obtain(name, spec).runs(AFTER), "_path": path}
        for scope, name in names.items():
            if (res := self.stored(name)) is not None:
                rows[f"{scope} (stored {name})"] = {"_path": f"results/{self.hardware}/{name}", "runs": [
                    r for v in res.variants.values() for r in v["runs"] if r.get("process_mode") == "mp"]}
        med = {k: summarize_two_process(r["runs"]) for k, r in rows.items() if r["runs"]}
        self.record(two_process={k: {f"{p}_cache_mib_{w}_reset": m[f"{p}_cache_bytes_{w}_reset"]["median"]
                                     / 2**20 for p in ("p0", "p1") for w in ("before", "after")}
                                 for k, m in med.items()})
        return rows


