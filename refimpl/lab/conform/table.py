"""Markdown of conformance results: one run's summary, and the docs table (release x field:
equal on N of M) from every committed ``results/conformance/*.summary.json``."""
from __future__ import annotations

import json
from pathlib import Path

from refimpl.lab.conform.compare import GROUPS

RESULTS = Path("results/conformance")


def _groups(tally: dict) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for f, (eq, n) in tally.items():
        g = out.setdefault(GROUPS.get(f, f), [0, 0])
        g[0] += eq
        g[1] += n
    return out


def _fmt(v) -> str:
    return json.dumps(v, separators=(",", ":"))[:80]


def summary_md(r: dict) -> str:
    m = r["meta"]
    head = (f"vLLM {m.get('vllm')} (transformers {m.get('transformers')}, torch {m.get('torch')}) "
            f"against the row {r['row']}" + ("" if r["row_given"] else " (the nearest: version not a row)")
            + f": {r['settings']} settings" + ("" if r["complete"] else " (PARTIAL: the probe did not finish)"))
    lines = [head, "", "| field | equal (fields x settings) |", "|---|---|"]
    lines += [f"| {g} | {eq} of {n} |" for g, (eq, n) in _groups(r["tally"]).items()]
    diffs = r["differences"]
    if diffs:
        lines += ["", "| setting | field | vLLM | kit | known |", "|---|---|---|---|---|"]
        lines += [f"| {d['setting']} | {d['field']} | {_fmt(d['got'])} | {_fmt(d['want'])} | {d['known'] or '**no**'} |"
                  for d in diffs[:60]]
        if len(diffs) > 60:
            lines.append(f"| ... {len(diffs) - 60} more in the summary JSON | | | | |")
    for name, reason in r.get("known", {}).items():
        lines += ["", f"Known, {name}: {reason}"]
    near = ", ".join(f"{n['row']} ({n['settings_failing']} failing)" for n in r["nearest"][:4])
    lines += ["", f"Nearest rows: {near}.",
              f"Unexplained differences: {r['failures']}" + (" (exit 1)" if r["failures"] else "")]
    return "\n".join(lines)


def _release_key(p: Path) -> tuple:
    v = p.name.removeprefix("vllm-").split(".summary")[0].removesuffix("-python")
    return tuple(int(x) for x in v.split(".") if x.isdigit()), p.name


def docs_table(results: Path = RESULTS) -> str:
    """Release x field table of the committed summaries (a contributor's ``-python`` runs included)."""
    runs = [(p, json.loads(p.read_text())) for p in sorted(results.glob("*.summary.json"), key=_release_key)]
    groups: list[str] = []
    for _, r in runs:
        groups += [g for g in _groups(r["tally"]) if g not in groups]
    head = "| vLLM (row) | settings | " + " | ".join(groups) + " | differences (known) |"
    lines = [head, "|" + "---|" * (len(groups) + 3)]
    for p, r in runs:
        g = _groups(r["tally"])
        known = len(r["differences"]) - r["failures"]
        cells = [f"{g[k][0]} of {g[k][1]}" if k in g else "-" for k in groups]
        label = f"{r['meta'].get('vllm')} ({r['row']})" + (" via --vllm-python" if "-python" in p.name else "")
        lines.append(f"| {label} | {r['settings']} | " + " | ".join(cells) + f" | {r['failures']} ({known}) |")
    return "\n".join(lines)
