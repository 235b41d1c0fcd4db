"""Every command written in README.md, docs/, the notebooks' markdown and the committed summary.md files
still runs: each ``refimpl bench ...`` line parses with the current CLI (tyro, the specs' flags; ``refimpl
bench sweep``, ``refimpl cost-check``, ``refimpl probe``, ``refimpl report`` and ``refimpl conform`` with theirs, the one-line refusal
form of cli_errors), each ``python -m refimpl...`` names a module that exists,
each ``make X`` a target of the Makefile."""
import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest

from refimpl.errors import RefimplError
from refimpl.lab import cli, report
from refimpl.lab.bench import sweep
from refimpl.lab.conform import cli as conform_cli
from refimpl.lab.explore import cost_check_cli
from refimpl.lab.probes import cli as probe_cli

ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r"```[a-z]*\n(.*?)```|`([^`]+)`", re.S)
# a command starts a code span or a line of a fenced block (after environment assignments)
START = re.compile(r"^(?:[A-Z_]+=\S+ )*(refimpl (?:bench|report|conform|cost-check|probe)(?=\s|$)|python -m refimpl[\w.]*|make [a-z][\w-]*)")


def _texts():
    for p in [ROOT / "README.md", *sorted(ROOT.glob("docs/**/*.md")), *sorted(ROOT.glob("results/*/summary.md"))]:
        yield p.relative_to(ROOT), p.read_text()
    for p in sorted(ROOT.glob("notebooks/*.ipynb")):
        cells = json.loads(p.read_text())["cells"]
        yield p.relative_to(ROOT), "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _commands(text: str):
    """Commands inside code spans and fenced blocks: from a command word to the end of the span or line
    (a shell comment cut off, a trailing backslash joining the next line)."""
    for m in CODE.finditer(text):
        lines = m.group(1).replace("\\\n", " ").splitlines() if m.group(1) else [" ".join(m.group(2).split())]
        for line in lines:
            line = re.sub(r"\s#\s.*$", "", line.strip())
            if s := START.match(line):
                yield line[s.start(1):].split(";")[0].split("&&")[0].split(" | ")[0].strip()


def _concrete(cmd: str) -> list[str]:
    """The words of ``cmd`` with its placeholders filled: [optional] parts kept, a|b the first, ... dropped."""
    cmd = cmd.replace("[", " ").replace("]", " ").replace("...", " ").replace(" NAME ", " startup ")
    words = shlex.split(cmd)
    return [w.split("|")[0] if "|" in w and not w.startswith("'") else w for w in words]


COMMANDS = sorted({(str(p), c) for p, t in _texts() for c in _commands(t)})
# every target of a rule line (``.venv setup: ...`` names two), not a ``:=`` assignment
TARGETS = {t for line in re.findall(r"^([.\w][\w .-]*?)\s*:(?!=)", (ROOT / "Makefile").read_text(), re.M)
           for t in line.split()}


def test_commands_were_found():
    kinds = {c.split()[0] + " " + c.split()[1] for _, c in COMMANDS}
    assert {"refimpl bench", "refimpl report", "refimpl conform", "refimpl cost-check"} <= kinds and len(COMMANDS) > 20


@pytest.mark.parametrize("where, cmd", COMMANDS, ids=[f"{p}: {c[:60]}" for p, c in COMMANDS])
def test_command_runs_with_the_current_cli(where, cmd):
    words = _concrete(cmd)
    parsers = {("refimpl", "bench", "sweep"): sweep.parse, ("refimpl", "cost-check"): cost_check_cli.parse,
               ("refimpl", "report"): report.parse,
               ("refimpl", "conform"): lambda a: a and conform_cli.parse(a),  # bare: the command named in prose
               ("refimpl", "bench"): cli.parse, ("refimpl", "probe"): probe_cli.parse}
    if prefix := next((k for k in parsers if tuple(words[:len(k)]) == k), None):
        try:
            parsers[prefix](words[len(prefix):])
        except SystemExit as e:
            if e.code != 0:  # --help exits 0
                pytest.fail(f"{where}: `{cmd}` does not parse (exit {e.code})")
        except RefimplError as e:  # a malformed flag: the one-line refusal
            pytest.fail(f"{where}: `{cmd}` does not parse ({e})")
    elif words[0] == "python":
        assert importlib.util.find_spec(words[2]) is not None, f"{where}: no module {words[2]}"
    else:
        assert words[1] in TARGETS, f"{where}: no make target {words[1]}"
