"""Generate docs/mechanisms/: one page per change of the ladder, the versions side by side.

Usage: python -m refimpl.lab.docs_gen.mechanism_pages [--check]

Each page is built from refimpl/variants.py (the switches that differ between its rows), the
pass table of refimpl.multimodal.worst_case (start-up rows: Qwen2.5-VL-3B at 128,000 tokens,
one image and one video, default max_pixels, max_num_batched_tokens 8192, as
refimpl.lab.docs_gen.pass_table), refimpl.core.kv_cache_utils.cross_attention_sizing (encoder-length
rows: whisper-large-v3 in float16, block size 16, 8192 batched tokens) and the source lines
that read each switch, found by searching refimpl/ for the switch's name, so the links follow
the code when it moves. The intro of each page is the hand-written text in PAGES. ``--check``
writes nothing and exits 1 when a page differs (tests/lab/docs_gen/test_mechanism_pages_current.py checks the same).
"""
from __future__ import annotations

import ast
import dataclasses
import io
import os
import re
import sys
import tokenize
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
SRC = ROOT / "refimpl"
# The mechanism's own folders: where a switch is read (the measuring half and the test helpers
# only pass rows along).
SKIP = ("analysis", "bench", "testing", "lab")
MAX_SITES = 5  # lines linked per switch
PROG = "python -m refimpl.lab.docs_gen.mechanism_pages"


@dataclass(frozen=True)
class Page:
    slug: str
    title: str
    kind: str  # "startup" or "encoder_len": which table of refimpl/variants.py the rows are in
    rows: tuple[str, ...]
    intro: str


PAGES = (
    Page("01-pr17935-profiling-cache-and-reset", "0.8.5 -> 0.9.0: the processing cache during profiling, "
         "then reset_mm_cache (PR #17935)", "startup", ("0.8.5", "0.9.0"), """
Before 0.9.0 every start-up pass that needs the worst-case items processed them from scratch:
the profiling entry points asked for no cache (PR #14336). PR #17935 lets them use the
process's processing cache even when the user turned caching off, so the budget lookups after
the first (passes #2 and #5) find what pass #1 stored, and adds `reset_mm_cache()`, called at the
end of start-up, to free the dummy outputs. One call gains nothing: the cached path hashes every
item, splits and stores the outputs and calls the HF processor again on the text, which is why
the reviewer's one-call timing showed the branch slower (`refimpl bench startup --calls 2`
repeats it). 0.9.0's hasher glues dtype, shape and data and joins them: 3 copies of an array."""),
    Page("02-pr24866-pr24989-whisper-encoder-length", "0.10.2 -> 0.11.0: Whisper's encoder length "
         "read from the config (PRs #24866, #24989)", "encoder_len",
         ("0.10.2", "0.10.2+#24866", "0.10.2+#24989", "0.11.0"), """
In 0.10.2 four call sites besides `VllmConfig.__post_init__` ask
`MULTIMODAL_REGISTRY.get_encdec_max_encoder_len` for Whisper's encoder length (1500), and the
registry keeps nothing: three processor creations and a 30 s float64 dummy clip through the
feature extractor and the hasher on every call. The
cross-attention metadata builder asks on every forward step, the scheduler on every admission
attempt, the runner once, the KV check once per decoder layer and once more.
`VllmConfig.__post_init__` already stored the answer in
`scheduler_config.max_num_encoder_input_tokens`; PR #24866 made the metadata builder read that
field, PR #24989 the scheduler, the runner and the KV check. Both shipped in 0.11.0. The review
warned that the field is the encoder length only while `__post_init__` overrides it (see the
0.13.0 page)."""),
    Page("03-v0.9.2-hasher-and-formula", "0.9.0 -> 0.9.2: the hasher without tobytes (PR #19484) "
         "and max tokens by formula (PR #19756)", "startup", ("0.9.0", "0.9.0+#19484", "0.9.0+#19756", "0.9.2"), """
0.9.2 shipped two start-up changes together. PR #19756 gives Qwen2/2.5-VL a formula for the
max tokens per item (`get_max_tokens_per_item`), so the budget lookups (passes #1, #2, #5)
process no dummy data; only the profile run's item is processed. PR #19484 hashes an array's
buffer instead of `tobytes()`: 2 full copies per hash instead of 3. The one-change rows put
each on 0.9.0 alone, so the ladder does not credit the hasher with what the formula saved."""),
    Page("04-v0.10.2-frame-fit-and-runner-cache", "0.9.2 -> 0.10.2: frames fitted to the whole "
         "sequence, a profiling cache that honours the user", "startup", ("0.9.2", "0.10.2"), """
Between 0.9.2 and 0.10.2 the dummy video's frames are fitted to the whole `seq_len` (until
0.10.1 the image tokens were taken out first: 12 frames at 128k, then 14, so 98,304 -> 114,688
tokens per video). 0.10.1 stops filling a cache the user disabled during profiling, and 0.10.2
profiles with the runner's own cache (`MultiModalBudget.cache`, absent at 0 GiB; the
scheduler's lookup passes none). The profile run reuses the runner's lookup (no pass #2) and
encodes `budget // tokens` items instead of `cdiv`; the processor hashes items even without a
cache (every Whisper registry call pays it)."""),
    Page("05-v0.11.0-stream-hasher-14-frames-profile-dummy", "0.10.2 -> 0.11.0: the streaming hasher "
         "(PR #24925), 14 frames, the profile dummy at max_model_len (PR #25553)", "startup",
         ("0.10.2", "0.9.0+#24925", "0.11.0"), """
PR #24925 feeds key and value chunks straight into blake3: no full copy of an array per hash
(its one-change row puts it on 0.9.0). The dummy video is capped at 14 frames instead of 16
(at 128k the fitting gives 14 anyway). PR #25553 builds the profile run's dummy at
`max_model_len`, so the encoder is profiled with the item the budget was sized for (14 frames,
114,688 tokens at 128k) instead of a one-frame video at `max_num_batched_tokens`: the profiled
peak now covers the largest item, and the int64 dummy video grows to 4.3 GB."""),
    Page("06-v0.11.1-uint8-video-and-reset-scope", "0.11.0 -> 0.11.1: a uint8 dummy video, the engine "
         "core's profiling cache cleared", "startup", ("0.11.0", "0.9.0+uint8", "0.11.1"), """
0.11.1 builds the dummy video with `dtype=np.uint8`: an eighth of the int64 array numpy chose
for `np.full(shape, 255)` in every earlier release (0.54 GB instead of 4.32 GB for 14 frames
of 3584 x 3584). Its `reset_mm_cache` also reaches the runner's profiling cache
(`model_executor.reset_mm_cache()`), so with two processes the engine core no longer keeps the
dummy outputs after start-up (`reset_scope`, read by the two-process engine; in-process one
registry cache stands for both). Serving: its `check_stop` (PR #26317) tests the last token's EOS
and stop ids before `max_tokens` / `max_model_len`, so EOS sampled as the last allowed token
finishes "stop", where 0.8.5 to 0.11.0 said "length" (`stop_check`, set on the scheduler by
`EngineCore`)."""),
    Page("07-v0.13.0-pr29421-encoder-budget", "0.11.0 -> 0.13.0: Whisper's encoder budget from "
         "max_num_batched_tokens, cross-attention sized from it (PR #29421)", "encoder_len",
         ("0.11.0", "0.13.0", "audios-per-step"), """
PR #29421 ("Whisper Enable Encoder Batching") stopped `VllmConfig` from setting
`max_num_encoder_input_tokens` to the encoder length, so the encoder budget follows
`max_num_batched_tokens` (8192 holds 5 audios per step; the metadata follows the scheduled
lengths, PR #29268). But the scheduler, the runner's block table and the KV check still read
that field as the encoder length: each request reserves `cdiv(8192, 16)` = 512 cross-attention
blocks instead of 94, the hazard the #24989 review warned about. refimpl reproduces the sizing
and refuses the row by default (`check_encoder_len`). `audios-per-step` is ours: a budget of N
audios with the per-item length in a field of its own at every site."""),
    Page("08-v0.13.0-pr29692-worst-case-image", "0.11.1 -> 0.13.0: the worst-case image from the "
         "closest factor pair (PR #29692)", "startup", ("0.11.1", "0.13.0"), """
Up to 0.12 the worst-case image is `smart_resize` of a 9999999 x 9999999 square; 0.13.0 lays
out the closest factor pair of the largest cell count. Neither is always the true maximum: at
`max_pixels` of 30 cells the square gives 25 tokens, the factor pair 30 and a 3200 x 16 strip 77;
at 768 * 28^2 the square gives 756 x 756 (729 tokens), the pair 896 x 672 (768); with
min = max = 256 * 28^2 a 1 x 200 image gives 454. refimpl's `true-max`
(`worst_case_image_size`) searches those shapes. At the default max_pixels all three give
3584 x 3584 (16,384 tokens), so the pass table below does not move."""),
    Page("09-v0.14.0-scheduler-fix", "0.13.0 -> 0.14.0: the scheduler's cross-attention length fixed, "
         "the runner's and the KV check's not", "encoder_len", ("0.13.0", "0.14.0"), """
0.14.0 gives the scheduler its own length (`_num_encoder_max_input_tokens`, one registry call
at construction), so admission allocates 94 cross-attention blocks again. The runner's block
table (`max(max_model_len, max_encoder_len)` wide) and `CrossAttentionSpec`'s memory check
still read the batching budget: 512 blocks each at 8192 batched tokens. refimpl's guard still
refuses the row by default."""),
    Page("10-refimpl-default", "0.13.0 -> refimpl: the kit's default start-up", "startup",
         ("0.13.0", "refimpl"), """
The kit's default is the latest release's start-up plus what refimpl fixes: the true
worst-case image, no frame cap, the profile dummy at the per-item maximum the budget and
admission use (admission refuses a larger item than the one profiled), an item larger than the
processing cache served uncached (PR #53016, after 0.14.0), float32 dummy audio, Whisper's max
tokens by formula, and no hashing without a cache."""),
    Page("11-shape-only", "refimpl -> shape-only: the profile run without an HF pass", "startup",
         ("refimpl", "shape-only"), """
Ours, a what-if: the profile run's inputs are built at their processed shapes from the
processor's size functions (`get_dummy_processed_inputs`, zero values) instead of processing a
dummy item, so start-up runs no HF-processor pass at all and builds no dummy video. The encoder
still runs on those inputs, so the profiled peak is the same. refimpl.testing's shape oracle
uses the same builder on meta tensors."""),
)

_STARTUP_FIELDS = tuple(f.name for f in dataclasses.fields(StartupVariant)
                        if f.name not in ("name", "reproduces", "release", "mm"))
_MM_FIELDS = tuple(f.name for f in dataclasses.fields(MultiModalSwitches))
# How code asks for a switch when not by its own name.
_READERS = {"formula_models": (r"\.uses_formula\(",), "encoder_budget": (r"\.encoder_budget\b",)}


def _docstring_lines(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            b = n.body[0]
            if isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
                out.update(range(b.lineno, (b.end_lineno or b.lineno) + 1))
    return out


def _sources() -> list[tuple[str, int, str, str]]:
    """(path from the repo root, line number, the line, its code without a comment) of every
    code line of the mechanism (docstrings and comment lines left out)."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if path.relative_to(SRC).parts[0] in SKIP or rel == "refimpl/variants.py":
            continue
        text = path.read_text()
        doc = _docstring_lines(ast.parse(text))
        comments = {t.start[0]: t.start[1] for t in tokenize.generate_tokens(io.StringIO(text).readline)
                    if t.type == tokenize.COMMENT}
        for i, line in enumerate(text.splitlines(), 1):
            code = line[:comments.get(i, len(line))].strip()
            if i not in doc and code:
                out.append((rel, i, line.strip(), code))
    return out


def _defined_at(name: str) -> int:
    """The line of refimpl/variants.py that declares the field ``name``."""
    for i, line in enumerate((SRC / "variants.py").read_text().splitlines(), 1):
        if re.match(rf"\s+{name}: ", line):
            return i
    raise LookupError(f"{name} is not a field of refimpl/variants.py")


def _link(rel: str, line: int) -> str:
    return f"[{rel}#L{line}](../../{rel}#L{line})"


def _code(s: str, width: int = 90) -> str:
    s = s if len(s) <= width else s[: width - 3] + "..."
    return "`" + s.replace("`", "'") + "`"


def where(name: str, sources, patterns=None) -> list[str]:
    """Markdown lines: where ``name`` is declared, then the code lines that read it."""
    pats = [re.compile(p) for p in (patterns or _READERS.get(name, (rf"\.{name}\b",)))]
    hits = [(rel, i, s) for rel, i, s, code in sources if any(p.search(code) for p in pats)]
    lines = [f"- `{name}` (declared {_link('refimpl/variants.py', _defined_at(name))})"
             if patterns is None else f"- {name}"]
    lines += [f"  - {_link(rel, i)} {_code(s)}" for rel, i, s in hits[:MAX_SITES]]
    if len(hits) > MAX_SITES:
        lines.append(f"  - and {len(hits) - MAX_SITES} more")
    return lines


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
           "do not edit: change the intro in that module, then run it. -->", "", f"# {page.title}", "",
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
