"""Markdown of conformance results: one run's summary, and the docs table (release x field:
equal on N of M) from every committed ``results/conformance/*/summary.json``."""
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


def _cell(text: str) -> str:
    return text.replace("|", "\\|")[:200]


def summary_md(r: dict) -> str:
    m = r["meta"]
    against = f"against the row {r['row']}" if r["row"] else "against no row (nothing probed to rank the rows by)"
    head = (f"vLLM {m.get('vllm')} (transformers {m.get('transformers')}, torch {m.get('torch')}) "
            f"{against}" + ("" if r["row_given"] or not r["row"] else " (the nearest: version not a row)")
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
    failed = r.get("unprobed", {})
    if failed:
        lines += ["", "| settings probed nothing | why |", "|---|---|"]
        lines += [f"| {n} | {_cell(why)} |" for why, n in sorted(failed.items(), key=lambda kv: -kv[1])]
    lines += memory_md(r)
    near = ", ".join(f"{n['row']} ({n['settings_failing']} failing)" for n in r["nearest"][:4])
    lines += ["", f"Nearest rows: {near}." if near else
              f"Nearest rows: none named (no setting could be probed: {sum(failed.values())} failed at set-up).",
              f"Unexplained differences: {r['failures']}" + (" (exit 1)" if r["failures"] else "")]
    return "\n".join(lines)


def memory_md(r: dict, top: int = 4) -> list[str]:
    """The settings of the largest predicted probe peaks, beside the measured (sampled) peak RSS."""
    pred = r.get("run", {}).get("predicted_peak", {}).get("by_setting", {})
    got = r.get("rss_by_setting", {})
    if not pred:
        return []
    out = ["", "| setting | probe peak predicted (GiB) | measured (GiB) |", "|---|---|---|"]
    for sid in sorted(pred, key=lambda k: -pred[k])[:top]:
        meas = f"{got[sid] / 2**30:.1f}" if sid in got else "not probed"
        out.append(f"| {sid} | {pred[sid] / 2**30:.1f} | {meas} |")
    return out


def _release_key(p: Path) -> tuple:
    v = p.parent.name.removeprefix("vllm-").removesuffix("-python")
    return tuple(int(x) for x in v.split(".") if x.isdigit()), "-python" in p.parent.name


def docs_table(results: Path = RESULTS) -> str:
    """Release x field table of the committed summaries (a contributor's ``-python`` runs included)."""
    runs = [(p, json.loads(p.read_text())) for p in sorted(results.glob("*/summary.json"), key=_release_key)]
    seen = {g for _, r in runs for g in _groups(r["tally"])}
    groups = [g for g in dict.fromkeys(GROUPS.values()) if g in seen] + sorted(seen - set(GROUPS.values()))
    head = "| vLLM (row) | settings | " + " | ".join(groups) + " | differences (known) |"
    lines = [head, "|" + "---|" * (len(groups) + 3)]
    for p, r in runs:
        g = _groups(r["tally"])
        known = len(r["differences"]) - r["failures"]
        cells = [f"{g[k][0]} of {g[k][1]}" if k in g else "-" for k in groups]
        sr = r.get("startup_row", r["row"])
        label = f"{r['meta'].get('vllm')} ({r['row'] or 'no row: nothing probed'}" \
            + (f"; start-up row {sr}" if sr != r["row"] else "") + ")" \
            + (" via --vllm-python" if "-python" in p.parent.name else "")
        lines.append(f"| {label} | {r['settings']} | " + " | ".join(cells) + f" | {r['failures']} ({known}) |")
    lines += ["", "Time and disk per run (the 2-core VM, shared with other jobs: figures taken under load):", "",
              "| vLLM | transformers / tokenizers / huggingface-hub / torch | install (s) | side venv (GB) | probe (s) "
              "| probe peak RSS (GB) | predicted (GB) |", "|---|---|---|---|---|---|---|"]
    for p, r in runs:
        m, run = r["meta"], r.get("run", {})
        inst = run.get("install") or {}
        secs = f"{inst['install_seconds']:.0f}" if "install_seconds" in inst else \
            "reused" if inst.get("reused") else f"{inst['seconds']:.0f}" if "seconds" in inst else "-"
        size = f"{inst['bytes'] / 1e9:.1f}" if "bytes" in inst else "-"
        probe = f"{run['probe_seconds']:.0f}" if "probe_seconds" in run else "-"
        peak = f"{run['probe_peak_rss_bytes'] / 1e9:.1f}" if "probe_peak_rss_bytes" in run else "not recorded"
        pred = run.get("predicted_peak", {}).get("bytes")
        pred_s = f"{pred / 1e9:.1f}" if pred else "-"
        label = m.get("vllm") + (" via --vllm-python" if "-python" in p.parent.name else "")
        lines.append(f"| {label} | {m.get('transformers')} / {m.get('tokenizers')} / {m.get('huggingface-hub')} / "
                     f"{m.get('torch')} | {secs} | {size} | {probe} | {peak} | {pred_s} |")
    return "\n".join(lines)


BEGIN, END = "<!-- conformance table: refimpl conform --table -->", "<!-- end of the conformance table -->"


def write_docs_table(doc: Path = Path("docs/conformance.md"), results: Path = RESULTS, check: bool = False) -> bool:
    """Replaces the block between BEGIN and END in ``doc`` with ``docs_table``; ``check``: write
    nothing, return whether it is current."""
    text = doc.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{docs_table(results)}\n{END}{tail}"
    if not check and new != text:
        doc.write_text(new)
    return new == text


def confirmed(row: str, results: Path = RESULTS) -> list[str]:
    """One line per committed run checked against ``row``: 'vLLM X: equal on N of M (known: K)'."""
    out = []
    for p in sorted(results.glob("*/summary.json"), key=_release_key):
        r = json.loads(p.read_text())
        if r["row"] != row:
            continue
        eq = sum(t[0] for t in r["tally"].values())
        n = sum(t[1] for t in r["tally"].values())
        known = len(r["differences"]) - r["failures"]
        how = " via --vllm-python" if "-python" in p.parent.name else ""
        out.append(f"vLLM {r['meta'].get('vllm')}{how}: {r['settings']} settings, fields equal on {eq} of {n}, "
                   f"{known} known difference(s), {r['failures']} unexplained ([{p.parent.name}]"
                   f"(../../results/conformance/{p.parent.name}/summary.json))")
    return out
