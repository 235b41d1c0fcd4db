"""What the notebooks show, as functions of a Result; ``Study``: one per notebook, in one of ``MODES``
(``stored`` reads results/<hardware>/, ``quick`` and ``full`` measure here through ``Study.obtain``)."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Optional, Sequence

from refimpl.errors import ConfigError
from refimpl.lab.bench import trial
from refimpl.lab.bench.fresh import profile_worker
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import Spec, command_of
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.stats import compare, summarize
from refimpl.variants import LEGACY_NAMES

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn (the explorer page imports this module)
    from matplotlib.figure import Figure

RESULTS_DIR = REPO_ROOT / "results"
REFERENCE = "cpu-amd-epyc-2c"  # the reference machine's folder under results/
MODES = ("stored", "quick", "full")
_OLD_NAMES = {new: old for old, new in LEGACY_NAMES.items()}


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-markdown table; floats shown with 3 significant digits."""
    def fmt(x: Any) -> str:
        return f"{x:.3g}" if isinstance(x, float) else str(x)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(fmt(x) for x in r) + " |" for r in rows])


def md(*blocks: str) -> str:
    """Markdown ``blocks`` (paragraphs, tables) a blank line apart, empty ones left out."""
    return "\n\n".join(b for b in blocks if b)


def spread(values: Sequence[float], fmt: str = ".3g") -> str:
    """'median [min, max]' of ``values`` ('-' when empty)."""
    if not values:
        return "-"
    s = summarize(values)
    return f"{s['median']:{fmt}} [{s['min']:{fmt}}, {s['max']:{fmt}}]"


def ratio_md(comparisons: dict[str, dict], label: str) -> str:
    """Markdown of ``compare`` results keyed by '<variant> / <base>': value, 95% CI, state."""
    return md_table([f"ratio of median {label}", "value", "95% CI", ""], [
        [k, "-" if c["estimate"] is None else f"{c['estimate']:.3f}",
         "-" if c["low"] is None else f"[{c['low']:.3f}, {c['high']:.3f}]", c["state"]]
        for k, c in comparisons.items()])


def compare_pairs(res: Result, metric: str, pairs: Iterable[tuple[str, str]],
                  min_n: int = 1) -> dict[str, dict]:
    """Per (variant, base), keyed '<variant> / <base>': ``compare`` of ``metric``'s medians."""
    return {f"{v} / {b}": compare(res.values(v, metric), res.values(b, metric), v, b, min_n)
            for v, b in pairs}


def partial_note(res: Result) -> str:
    """A markdown line saying that ``res`` is partial (interrupted or failed), else ''."""
    runs = ", ".join(f"{v} {len(r['runs'])}" for v, r in res.variants.items())
    why = ((res.params.get("failed") or "").splitlines() or [""])[0] or (
        "interrupted (Ctrl-C) before the last run" if res.params.get("interrupted") else "")
    return f"**Partial result** (runs per variant: {runs}): {why}" if why else ""


def provenance(res: Result) -> str:
    """'<hardware> (<device>), commit <sha>, <fresh processes | one process>' of ``res``."""
    git = res.env.get("git") or {}
    sha = (git.get("commit") or "unknown")[:7] + ("+dirty" if git.get("dirty") else "")
    how = "one process" if res.env.get("in_process") else "fresh processes"
    return f"{res.hardware_name} ({res.env.get('device', '?')}), commit {sha}, {how}"


def section_md(title: str, res: Result, how: str, *blocks: str) -> str:
    """A summary.md section (``md``): ``title``, 'Measured on <provenance><how>', the command that
    made ``res``, ``partial_note``, ``blocks``."""
    cmd = command_of(res.bench, res.params, in_process=res.env.get("in_process", False))
    return md(title, f"Measured on {provenance(res)}{how}", f"Command: `{cmd}`", partial_note(res), *blocks)


class Shown(list):
    """What one notebook cell shows, in order: markdown (str), figures, SVG files (Path), any displayable."""

    def _ipython_display_(self) -> None:
        from IPython.display import SVG, Markdown, display
        for x in self:
            display(Markdown(x) if isinstance(x, str) else SVG(filename=str(x)) if isinstance(x, Path) else x)


def measure(spec: Spec, in_process: bool = False, out: Optional[Path] = None) -> Result:
    """``spec`` measured by trial.run, written to ``out``; a failed run raises RuntimeError after writing."""
    return trial.run(spec, in_process=in_process, out=out, check=True)


def figure(width: float, height: float, cols: int = 1):
    """A Figure (constrained layout, no pyplot: the caller displays or saves it) and its axes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots(1, cols)


def save(fig: Figure, out_dir: Path, name: str) -> Figure:
    """Save ``fig`` as ``<name>.png`` and ``.svg`` under ``out_dir``; returns ``fig``."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    fig.savefig(Path(out_dir) / f"{name}.svg")
    fig.savefig(Path(out_dir) / f"{name}.png", dpi=110)
    return fig


def flamegraph(spec: Spec, variant: str, out_dir: Path, name: str, *,
               speedscope: bool = True, rate: int = 50) -> Optional[Path]:
    """py-spy flame graph (SVG, and speedscope JSON) of one worker run of ``variant``, or None."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ok = profile_worker(spec, variant, out_dir / f"{name}.svg",
                        out_dir / f"{name}.speedscope.json" if speedscope else None, rate=rate)
    return out_dir / f"{name}.svg" if ok else None


@dataclass
class Study:
    """A notebook's mode, stored results, ``out_dir``, recorded ``values`` and ``timings`` (wall s)."""
    values_name: ClassVar[str] = "values.json"
    mode: str = "stored"
    hardware: str = REFERENCE
    out_dir: Path = Path("reports/latest")
    values: dict = field(default_factory=dict, repr=False)
    timings: dict = field(default_factory=dict, repr=False)
    shown: set = field(default_factory=set, repr=False)  # file names of results/<hardware> loaded so far

    @classmethod
    def from_parameters(cls, ns: dict) -> "Study":
        """The study of a notebook's parameters cell: each field from the upper-case name in ``ns``
        (``OUT_DIR`` -> ``out_dir``; ``globals()`` of the notebook), the default where absent."""
        return cls(**{f.name: ns[f.name.upper()] for f in fields(cls) if f.init and f.name.upper() in ns})

    def __post_init__(self):
        if self.mode not in MODES:
            raise ConfigError("mode", MODES, f"unknown mode {self.mode!r}")
        self.out_dir = Path(self.out_dir)
        if not (RESULTS_DIR / self.hardware).is_dir():
            raise ConfigError("hardware", sorted(p.name for p in RESULTS_DIR.iterdir() if p.is_dir()),
                              f"no folder results/{self.hardware}")

    @property
    def quick(self) -> bool:
        return self.mode == "quick"

    @property
    def where(self) -> str:
        return f"results/{self.hardware}" if self.mode == "stored" else "here"

    def stored(self, name: str) -> Optional[Result]:
        """``results/<hardware>/<name>`` (or its ``legacy_file_name``) as a Result; None when absent."""
        for n in (name, legacy_file_name(name)):
            if (p := RESULTS_DIR / self.hardware / n).exists():
                self.shown.add(n)
                return Result.load(p)
        return None

    def obtain(self, name: str, spec: Spec, in_process: bool = False) -> Result:
        """The stored ``name`` (stored mode), else ``spec`` measured here into ``<out_dir>/<name>``."""
        if self.mode == "stored":
            if (res := self.stored(name)) is None:
                raise ConfigError("hardware", f"a folder of results/ holding {name}",
                                  f"results/{self.hardware} has none")
            return res
        t0 = time.perf_counter()
        try:
            return measure(spec, in_process, self.out_dir / name)
        finally:
            self.timings[name] = time.perf_counter() - t0
            self.record(timings_s=self.timings)

    def record(self, **kv: Any) -> dict:
        """Add ``kv`` to ``values`` and rewrite ``<out_dir>/<values_name>`` (JSON)."""
        self.values.update(kv, mode=self.mode)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / self.values_name).write_text(json.dumps(self.values, indent=1, default=str))
        return self.values

    def timings_section(self) -> Shown:
        """The wall seconds each measured part took here, and where the values were recorded."""
        return Shown([timings_table(self) if self.timings else f"{self.mode} mode: nothing measured here",
                      f"Recorded values: `{self.out_dir / self.values_name}`"])


def legacy_file_name(name: str) -> str:
    """``name`` with its row names in their old spelling (refimpl.variants.LEGACY_NAMES)."""
    stem, dot, ext = name.rpartition(".")
    return "_".join(_OLD_NAMES.get(part, part) for part in stem.split("_")) + dot + ext


def timings_table(s: Study) -> str:
    """Markdown: wall seconds each measured part of ``s`` took here."""
    return md_table(["part", "wall s"], [[k, f"{v:.0f}"] for k, v in s.timings.items()]
                    + [["total", f"{sum(s.timings.values()):.0f}"]])
