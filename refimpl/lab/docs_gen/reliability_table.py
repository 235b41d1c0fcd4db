"""Generate the bad-input table of docs/reliability.md by feeding every malformed input to the kit.

Usage: python -m refimpl.lab.docs_gen.reliability_table [--doc docs/reliability.md] [--check]

The cases come from refimpl/testing/bad_inputs.py (the same list tests/testing/test_bad_inputs.py
runs). Each is actually run; the table records the exception type, its ``field`` and
``limit`` and message, or the documented behaviour of an accepted input. The table replaces
the text between the BEGIN/END markers in the doc. ``--check`` writes nothing and exits 1 if
the doc's table differs from a fresh run (or any case crashes or deviates from its case).
Exit status 2 if a case crashed (a non-refimpl exception).
"""
from __future__ import annotations

import os
import re
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

PROG = "python -m refimpl.lab.docs_gen.reliability_table"
BEGIN = f"<!-- BEGIN bad-input table ({PROG}) -->"
END = "<!-- END bad-input table -->"


def _cell(x) -> str:
    s = re.sub(r" at 0x[0-9a-fA-F]+", "", str(x))  # object addresses differ run to run
    return s.replace("|", "\\|").replace("\n", " ")


def build_table() -> tuple[str, int]:
    """(markdown table, number of crashed or deviating cases)."""
    import torch
    torch.set_num_threads(1)
    from refimpl.testing.bad_input_kit import Kit, run_case
    from refimpl.testing.bad_inputs import CASES
    kit = Kit()
    rows = ["| # | group | input | entry point | outcome | exception: field, limit / behaviour | message / result |",
            "|---|---|---|---|---|---|---|"]
    bad = 0
    for i, case in enumerate(CASES, 1):
        out = run_case(case, kit)
        if out.kind == "raised":
            ok = (case.raises is not None and out.exc_type == case.raises.__name__
                  and (out.field, out.limit) == (case.field, case.limit))
            what = f"`{out.exc_type}`: field `{out.field}`, limit `{out.limit}`"
        elif out.kind == "accepted":
            ok = case.raises is None and case.check is not None and bool(case.check(out.result))
            what = case.behaviour
        else:
            ok, what = False, f"**CRASH** `{out.exc_type}`"
        bad += not ok
        outcome = {"raised": "refused", "accepted": "accepted", "crashed": "CRASH"}[out.kind]
        if not ok:
            outcome += " (DEVIATES from its case)"
        rows.append(f"| {i} | {case.group} | `{case.id}`: {_cell(case.what)} | {case.entry} | {outcome} | "
                    f"{_cell(what)} | {_cell(out.message[:160])} |")
    return "\n".join(rows) + "\n", bad


@dataclass(frozen=True)
class ReliabilityTableArgs:
    """Generate the bad-input table of docs/reliability.md by feeding every malformed input to the kit."""
    doc: Annotated[Path, default("docs/reliability.md")] = REPO_ROOT / "docs" / "reliability.md"  # the doc whose table is replaced
    check: bool = False  # compare with the doc, write nothing


def main(argv: Optional[list[str]] = None) -> int:
    """0; 1 when --check finds a difference or a deviating case; 2 when a case crashed."""
    try:
        args = flags(ReliabilityTableArgs, argv, PROG)
    except RefimplError as e:
        return refuse(PROG, e)
    table, bad = build_table()
    doc = Path(args.doc)
    text = doc.read_text() if doc.exists() else f"# Reliability\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        print(f"{doc}: markers not found; table follows\n\n{table}")
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{table}{END}{tail}"
    if args.check:
        same = new == text
        print("table up to date" if same else "table differs from a fresh run")
        return 0 if same and not bad else 1
    doc.write_text(new)
    print(f"wrote {doc}: {table.count(chr(10)) - 2} cases, {bad} crashed or deviating")
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
