"""Generate docs/background.md's start-up rows table and pass table from refimpl/variants.py.

Usage: python -m refimpl.lab.docs_gen.pass_table [--doc docs/background.md] [--check]

Both tables are computed, nothing is measured: the rows' switches come from
``refimpl.variants.STARTUP_VARIANTS``; HF passes per phase, frames and tokens from
``refimpl.multimodal.worst_case`` (the same size functions the dummy builders use; no HF
pass, no dummy array), for Qwen2.5-VL-3B at its 128000-token context with one image and one
video per prompt, the default max_pixels and max_num_batched_tokens = 8192. Each table
replaces the text between its BEGIN/END markers. ``--check`` writes nothing and exits 1 if the
doc differs. tests/engine/test_release_rows.py checks every row of the doc against ``pass_row``.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

from refimpl.errors import RefimplError
from refimpl.lab.bench.specs import default
from refimpl.lab.cli_errors import flags, refuse
from refimpl.lab.env import REPO_ROOT

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PROG = "python -m refimpl.lab.docs_gen.pass_table"
MARKERS = {"rows": (f"<!-- BEGIN start-up rows ({PROG}) -->", "<!-- END start-up rows -->"),
           "passes": (f"<!-- BEGIN pass table ({PROG}) -->", "<!-- END pass table -->")}
PASS_COLUMNS = ("row", "runner_init #1", "profile_run #2 #3", "scheduler_init #5", "HF passes",
                "budget video: frames, tokens", "profile dummy: frames, tokens, items", "image tokens",
                "largest dummy video (GB)")


def configs():
    """(ModelConfig, SchedulerConfig) of the table: Qwen2.5-VL-3B at 128k, 8192 batched tokens."""
    from refimpl.config import ModelConfig, SchedulerConfig
    return ModelConfig("qwen2.5-vl-3b", device="cpu", scale="small"), SchedulerConfig(max_num_batched_tokens=8192)


def pass_row(name: str, mc, sc) -> dict[str, str]:
    """The pass table's cells for start-up row ``name``, computed."""
    from refimpl.config import VllmConfig
    from refimpl.engine.startup_plan import StartupPlan
    from refimpl.multimodal.worst_case import lookup_specs, max_tokens_per_item, profile_dummy
    from refimpl.variants import get_startup_variant
    v = get_startup_variant(name)
    passes = StartupPlan.build(VllmConfig(mc, sc), v).hf_passes_by_phase()
    per_item, dummy = max_tokens_per_item(mc, v), profile_dummy(mc, sc, v)
    assert dummy is not None, f"{name}: no profile dummy for {mc.model}"  # Qwen2.5-VL start-up rows have one
    lookup_video = next(s for s in lookup_specs(mc, v) if s[0] == "video")
    built = ([] if v.uses_formula(mc.model) else [lookup_video]) + ([dummy.spec] if not v.mm.shape_only else [])
    item = 8 if v.mm.dummy_video_dtype == "int64" else 1
    largest = max((t * w * h * 3 * item for _, t, w, h in built), default=0)
    return {"row": f"`{name}`", "runner_init #1": str(passes["runner_init"]),
            "profile_run #2 #3": str(passes["profile_run"]), "scheduler_init #5": str(passes["scheduler_init"]),
            "HF passes": str(sum(passes.values())),
            "budget video: frames, tokens": f"{lookup_video[1]}, {per_item['video']:,}",
            "profile dummy: frames, tokens, items": f"{dummy.spec[1]}, {dummy.tokens:,}, {dummy.items}",
            "image tokens": f"{per_item['image']:,}",
            "largest dummy video (GB)": f"{largest / 1e9:.2f} {v.mm.dummy_video_dtype}" if largest else "none"}


def _table(columns, rows) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(out + ["| " + " | ".join(r[c] for c in columns) + " |" for r in rows])


def rows_table() -> str:
    """One line per start-up row: its release and every switch."""
    from refimpl.variants import STARTUP_VARIANTS
    cols = ("row", "release", "profiling cache", "formula", "reset", "reset scope", "profile dummy at",
            "items", "worst-case image", "frame cap", "frame fit", "hasher", "hash uncached", "video",
            "audio", "oversize", "shape-only")
    rows = []
    for n, v in STARTUP_VARIANTS.items():
        m = v.mm
        rows.append(dict(zip(cols, (
            f"`{n}`", v.release or "-", v.profiling_cache, ", ".join(v.formula_models) or "-",
            "yes" if v.reset_at_end else "no", v.reset_scope, v.profile_seq_len, v.profile_items,
            m.worst_case_image, str(m.max_frames_per_video or "-"), m.frame_fit, m.hash_byte_path,
            "yes" if m.hash_uncached else "no", m.dummy_video_dtype, m.dummy_audio_dtype, m.oversize_item,
            "yes" if m.shape_only else "no"))))
    return _table(cols, rows)


def pass_table() -> str:
    from refimpl.variants import STARTUP_VARIANTS
    mc, sc = configs()
    return _table(PASS_COLUMNS, [pass_row(n, mc, sc) for n in STARTUP_VARIANTS])


def parse_table(doc: str, which: str) -> dict[str, dict[str, str]]:
    """The table between ``which``'s markers in ``doc``: {row name: {column: cell}}."""
    begin, end = MARKERS[which]
    lines = [ln for ln in doc.split(begin, 1)[1].split(end, 1)[0].strip().splitlines() if ln.startswith("|")]
    cols = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(cols, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[2:]]
    return {r["row"].strip("`"): r for r in rows}


def replace_block(doc: str, which: str, table: str) -> str:
    begin, end = MARKERS[which]
    head, rest = doc.split(begin, 1)
    return f"{head}{begin}\n{table}\n{end}{rest.split(end, 1)[1]}"


@dataclass(frozen=True)
class PassTableArgs:
    """Generate docs/background.md's start-up rows table and pass table from refimpl/variants.py."""
    doc: Annotated[Path, default("docs/background.md")] = REPO_ROOT / "docs/background.md"  # the doc whose tables are replaced
    check: bool = False  # exit 1 if the doc's tables differ; write nothing


def main(argv: Optional[list[str]] = None) -> int:
    """0; 1 when --check finds the tables differ."""
    try:
        a = flags(PassTableArgs, argv, PROG)
    except RefimplError as e:
        return refuse(PROG, e)
    doc = Path(a.doc).read_text()
    new = replace_block(replace_block(doc, "rows", rows_table()), "passes", pass_table())
    if a.check:
        print("up to date" if new == doc else f"{a.doc}: tables differ; run {PROG}")
        return int(new != doc)
    Path(a.doc).write_text(new)
    print(f"wrote {a.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
