"""Generate docs/mechanisms/: one page per change of the ladder, the versions side by side.

Usage: python -m refimpl.lab.docs_gen.mechanism_pages [--check]

Each page is built from refimpl/variants.py (the switches that differ between its rows), the
pass table of refimpl.multimodal.worst_case (start-up rows: Qwen2.5-VL-3B at 128,000 tokens,
one image and one video, default max_pixels, max_num_batched_tokens 8192, as
refimpl.lab.docs_gen.pass_table), refimpl.core.kv_cache_utils.cross_attention_sizing (encoder-length
rows: whisper-large-v3 in float16, block size 16, 8192 batched tokens) and the source lines
that read each switch, found by searching refimpl/ for the switch's name, so the links follow
the code when it moves (docs_gen/source_sites.py). The intro of each page is the hand-written text
in PAGES (docs_gen/mechanism_intros.py). ``--check``
writes nothing and exits 1 when a page differs (tests/lab/docs_gen/test_mechanism_pages_current.py checks the same).
"""
from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig  # noqa: E402
from refimpl.core.kv_cache_utils import cross_attention_sizing  # noqa: E402
from refimpl.errors import RefimplError  # noqa: E402
from refimpl.lab.cli_errors import flags, refuse  # noqa: E402
from refimpl.lab.conform.table import confirmed  # noqa: E402
from refimpl.lab.docs_gen import pass_table as make_pass_table  # noqa: E402
from refimpl.lab.docs_gen.mechanism_intros import PAGES, Page  # noqa: E402
from refimpl.lab.docs_gen.source_sites import (  # noqa: E402
    _READERS,
    MAX_SITES,
    SKIP,
    SRC,
    _sources,
    where,
)
from refimpl.lab.env import REPO_ROOT as ROOT  # noqa: E402
from refimpl.multimodal import MultiModalRegistry  # noqa: E402
from refimpl.variants import (  # noqa: E402
    ENCODER_LEN_SITES,
    ENCODER_LEN_VARIANTS,
    STARTUP_VARIANTS,
    MultiModalSwitches,
    StartupVariant,
)

OUT = ROOT / "docs" / "mechanisms"
BACKGROUND = ROOT / "docs/background.md"
BG = f"[{BACKGROUND.name}]({os.path.relpath(BACKGROUND, OUT)})"  # the link from a page
PROG = "python -m refimpl.lab.docs_gen.mechanism_pages"
__all__ = ["MAX_SITES", "OUT", "PAGES", "SKIP", "SRC", "Page", "main", "pages", "render", "stale", "where"]

_STARTUP_FIELDS = tuple(f.name for f in dataclasses.fields(StartupVariant)
                        if f.name not in ("name", "reproduces", "release", "mm"))
_MM_FIELDS = tuple(f.name for f in dataclasses.fields(MultiModalSwitches))


def _value(v) -> str:
    if isinstance(v, tuple):
        return ", ".join(v) or "-"
    return "-" if v is None else str(v)


def _table(cols: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + ["| " + " | ".join(r) + " |" for r in rows]


def startup_sections(page: Page, sources) -> list[str]:
    rows = [STARTUP_VARIANTS[n] for n in page.rows]
    fields = [(f, lambda v, f=f: getattr(v, f)) for f in _STARTUP_FIELDS]
    fields += [(f, lambda v, f=f: getattr(v.mm, f)) for f in _MM_FIELDS]
    # what the page's change changed (first row -> last), and what each one-change row adds to its base
    pairs = [(rows[0], rows[-1])] + [(STARTUP_VARIANTS[v.name.split("+")[0]], v) for v in rows if "+" in v.name]
    changed = [(f, get) for f, get in fields if any(get(a) != get(b) for a, b in pairs)]
    out = ["## The rows side by side", ""]
    out += _table(["switch"] + [f"`{n}`" for n in page.rows],
                  [[f"`{'mm.' if f in _MM_FIELDS else ''}{f}`"] + [_value(get(v)) for v in rows]
                   for f, get in changed])
    out += [""] + [f"- `{v.name}`: {v.reproduces}" for v in rows]
    mc, sc = make_pass_table.configs()
    cols = ["runner_init #1", "profile_run #2 #3", "scheduler_init #5", "HF passes",
            "budget video: frames, tokens", "profile dummy: frames, tokens, items", "largest dummy video (GB)"]
    out += ["", "## HF-processor passes by start-up phase", "",
            "Qwen2.5-VL-3B at 128,000 tokens, one image and one video per prompt, default `max_pixels`, "
            "`max_num_batched_tokens` 8192 (`refimpl.engine.startup_plan.StartupPlan.hf_passes_by_phase`, the "
            f"pass table of {BG}):", ""]
    passes = [make_pass_table.pass_row(n, mc, sc) for n in page.rows]
    out += _table(["row"] + cols, [[p["row"]] + [p[c] for c in cols] for p in passes])
    out += ["", "## Where the code reads each switch", ""]
    for f, _ in changed:
        out += where(f, sources)
    return out


def _whisper(variant: str) -> VllmConfig:
    return VllmConfig(ModelConfig("whisper-large-v3", device="cpu", scale="full", dtype="float16"),
                      SchedulerConfig(max_num_batched_tokens=8192), CacheConfig(block_size=16),
                      encoder_len_variant=variant, mm_registry=MultiModalRegistry())


def encoder_len_sections(page: Page, sources) -> list[str]:
    rows = [ENCODER_LEN_VARIANTS[n] for n in page.rows]
    out = ["## The rows side by side", "",
           "Where each call site reads the encoder length (`registry`: the uncached registry call; "
           "`config`: `scheduler_config.max_num_encoder_input_tokens`; `per-item`: "
           "`scheduler_config.encoder_len_per_item`), and the encoder budget:", ""]
    out += _table(["site"] + [f"`{n}`" for n in page.rows],
                  [[f"`{s}`"] + [v.source(s) for v in rows] for s in ENCODER_LEN_SITES]
                  + [["`encoder_budget`"] + [v.encoder_budget for v in rows]])
    out += [""] + [f"- `{v.name}`: {v.reproduces}" for v in rows]
    out += ["", "## Cross-attention sizing of one request", "",
            "whisper-large-v3 in float16, block size 16, `max_num_batched_tokens` 8192 "
            "(`refimpl.core.kv_cache_utils.cross_attention_sizing`; 94 blocks hold 1500 positions):", ""]
    sizing = []
    for n in page.rows:
        z = cross_attention_sizing(_whisper(n))
        sizing.append([f"`{n}`", str(z.scheduler_blocks), f"{z.scheduler_blocks * z.bytes_per_block:,}",
                       str(z.block_table_width), str(z.kv_check_blocks)])
    out += _table(["row", "blocks the scheduler allocates", "bytes", "block-table width", "KV check (blocks)"],
                  sizing)
    out += ["", "## Where the code reads the encoder length", ""]
    for s in ENCODER_LEN_SITES:
        out += where(f"`{s}` site", sources, (rf"get_encoder_len\(\"{s}\"\)",))
    out += where("the registry call", sources, (r"get_encdec_max_encoder_len\(",))
    out += where("`encoder_budget`", sources, _READERS["encoder_budget"])
    return out


def conformance_section(page: Page) -> list[str]:
    """Which runs of real vLLM (``refimpl conform``, results/conformance/) checked the page's release rows."""
    table = STARTUP_VARIANTS if page.kind == "startup" else ENCODER_LEN_VARIANTS
    if not any(table[row].release for row in page.rows):
        return []
    out = ["", "## Confirmed against real vLLM", "",
           "`refimpl conform` ran each release's own profiling code over the grid of "
           "[conformance.md](../conformance.md) and compared it with the row:", ""]
    for row in page.rows:
        if not table[row].release:
            continue
        runs = confirmed(row, ROOT / "results" / "conformance")
        out += [f"- `{row}`: " + ("; ".join(runs) if runs else "no run of this release committed yet")]
    return out


def render(page: Page, sources) -> str:
    out = ["<!-- GENERATED by refimpl/lab/docs_gen/mechanism_pages.py from refimpl/variants.py and the source; "
           "do not edit: change the intro in refimpl/lab/docs_gen/mechanism_intros.py, then run it. -->", "", f"# {page.title}", "",
           page.intro.strip(), ""]
    out += (startup_sections if page.kind == "startup" else encoder_len_sections)(page, sources)
    out += conformance_section(page)
    out += ["", f"The story and the release checks: {BG}; every page: [README.md](README.md)."]
    return "\n".join(out) + "\n"


def index() -> str:
    out = ["<!-- GENERATED by refimpl/lab/docs_gen/mechanism_pages.py; do not edit. -->", "",
           "# The mechanisms, one page per change", "",
           "Each page shows one change of the ladder: the rows of refimpl/variants.py side by side "
           "(only the switches that differ), what the change does to start-up's HF-processor passes "
           "or to Whisper's cross-attention sizing, and links to the lines that read each switch. "
           "Regenerate with `python -m refimpl.lab.docs_gen.mechanism_pages` (tests/lab/docs_gen/test_mechanism_pages.py "
           "fails when a page is out of date with the code).", ""]
    out += [f"{i}. [{p.title}]({p.slug}.md)" for i, p in enumerate(PAGES, 1)]
    return "\n".join(out) + "\n"


def pages() -> dict[Path, str]:
    """{path: text} of every page and the index, generated now."""
    sources = _sources()
    out = {OUT / f"{p.slug}.md": render(p, sources) for p in PAGES}
    out[OUT / "README.md"] = index()
    return out


def stale(generated: dict[Path, str]) -> list[str]:
    """Pages that differ from ``generated`` on disk, and pages on disk that no longer exist."""
    bad = [p.relative_to(ROOT).as_posix() for p, text in generated.items()
           if not p.exists() or p.read_text() != text]
    bad += [p.relative_to(ROOT).as_posix() for p in OUT.glob("*.md") if p not in generated]
    return bad


@dataclass(frozen=True)
class PagesArgs:
    """Generate docs/mechanisms/ from refimpl/variants.py and the source."""
    check: bool = False  # exit 1 if a page is out of date; write nothing


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m refimpl.lab.docs_gen.mechanism_pages [--check]``: 0, 1 when --check finds a stale page."""
    try:
        a = flags(PagesArgs, argv, PROG)
    except RefimplError as e:
        return refuse(PROG, e)
    generated = pages()
    if a.check:
        bad = stale(generated)
        print("\n".join(f"{b}: out of date; run python -m refimpl.lab.docs_gen.mechanism_pages" for b in bad)
              or "up to date")
        return int(bool(bad))
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.md"):
        if old not in generated:
            old.unlink()
    for path, text in generated.items():
        path.write_text(text)
    print(f"wrote {len(generated)} pages to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
