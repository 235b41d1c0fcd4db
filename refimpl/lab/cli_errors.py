"""tyro's boxed parse errors as the kit's one-line refusal: ``ConfigError(field, limit, message)``.

tyro (the benches' flag parser) prints a rich panel of 10-20 lines for a malformed flag
(``--max-model-len 32k``, an unknown ``--repeatz``) and exits 2. ``parse_or_refuse`` runs the parse
with tyro's output captured and, on a parse error, raises the ConfigError that names the field
(the flag in the spec's spelling, ``max_model_len``), what the flag accepts, and what was given;
``refimpl bench`` prints it as every other refusal: ``refimpl bench NAME: error: FIELD: ... (limit: ...)``.
Every command of the kit reads its flags this way (``flags``: report, conform, cost-check, bench
sweep, the docs generators) and refuses in that one line (``refuse``).
"""
from __future__ import annotations

import contextlib
import io
import re
import sys
from typing import Callable, Optional, Sequence, TypeVar

import tyro

from refimpl.errors import ConfigError, RefimplError

T = TypeVar("T")
_FLAG = re.compile(r"--([a-z0-9][\w-]*)")


def _panel(out: str) -> tuple[str, list[list[str]]]:
    """(title, paragraphs as lists of lines) of tyro's panel, box characters and rules removed (rich
    draws a box on a terminal and plain rules elsewhere)."""
    title, paras, cur = "", [], []
    for raw in out.splitlines():
        line = raw.strip().strip("│╭╮╰╯").strip()
        if line and set(line) <= set("─-━ "):
            line = ""
        if not title:
            title = line
            continue
        if line:
            cur.append(line)
        elif cur:
            paras.append(cur)
            cur = []
    return title, paras + ([cur] if cur else [])


def one_line(out: str, argv: list[str], prog: str = "refimpl bench NAME") -> ConfigError:
    """The ConfigError of tyro's error panel ``out`` for the flags ``argv`` of ``prog``: the field (the
    flag in the spec's spelling), what it accepts (the argument's help line) and what was given."""
    title, paras = _panel(out)
    text = [" ".join(p) for p in paras]
    first = next((t for t in text if not t.lower().startswith(("for full helptext", "argument helptext"))), "")
    kind = title.lower()
    if kind.startswith("missing subcommand") or "available subcommands" in " ".join(text).lower():
        choices = re.search(r"(?:one of|subcommands:)\s*\{?([\w-]+(?:, [\w-]+)*)", " ".join(text))
        got = first.split(":", 1)[-1].strip() if kind.startswith("unrecognized") else "none"
        return ConfigError("bench", choices[1].strip(" .") if choices else "a bench name", f"got {got}")
    if kind.startswith("unrecognized"):
        given = first.split(":", 1)[-1].strip()
        word = given.split(",")[0].strip()
        if word.startswith("--"):
            maybe = [f for t in text if t.lower().startswith("perhaps") for f in _FLAG.findall(t) if f != "help"]
            return ConfigError(word[2:].replace("-", "_"), f"a flag of `{prog} --help`"
                               + (f" (perhaps --{maybe[0]})" if maybe else ""), f"unknown flag {word}")
        i = argv.index(word) if word in argv else 0
        before = argv[i - 1] if i > 0 and argv[i - 1].startswith("--") else ""
        return ConfigError(before[2:].replace("-", "_") or "flags", "no value" if before else "flags only",
                           f"unexpected {word!r}" + (f" after {before}" if before else ""))
    flags = _FLAG.findall(first) or [a[2:] for a in argv if a.startswith("--")] or ["flags"]
    choice = re.search(r"invalid choice '(.*?)' for argument '(?:-\w/)?--([\w-]+)'\. "
                       r"Expected one of \((.*?)\)", " ".join(text))
    if choice:  # a value outside a Literal's choices: the choices named
        return ConfigError(choice[2].replace("-", "_"), "one of " + choice[3].replace("'", ""), f"got {choice[1]!r}")
    if kind.startswith("required"):  # required flags not given: each named
        return ConfigError(flags[0].replace("-", "_"), "a required flag",
                           "not given: " + ", ".join(f"--{f}" for f in flags))
    field = flags[0].split("=")[0].replace("-", "_")
    helptext = next((p[1:] for p in paras if p[0].lower().startswith("argument helptext")), [])
    accepts = ": ".join(h.replace(f"--{flags[0]}", "", 1).strip() for h in helptext) or "see --help"
    flag = f"--{flags[0]}"
    value = argv[argv.index(flag) + 1] if flag in argv[:-1] else None
    if kind.startswith("missing"):
        message = f"{flag} needs a value"
    elif value is not None:
        message = f"cannot read {value!r} as {accepts.split(':')[0] if helptext else 'this flag'}"
    else:
        message = first.split(":", 1)[-1].strip().rstrip(".!") or title
    return ConfigError(field, accepts, message)


def parse_or_refuse(parse: Callable[[], T], argv: list[str], prog: str = "refimpl bench NAME") -> T:
    """``parse()`` with tyro's console output captured; a parse error (exit status 2) raised as
    ``one_line``'s ConfigError; ``--help`` (exit 0) printed and re-raised as it was."""
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            return parse()
    except SystemExit as e:
        if e.code not in (0, None):
            raise one_line(err.getvalue() + out.getvalue(), argv, prog) from None
        sys.stdout.write(out.getvalue())
        sys.stderr.write(err.getvalue())
        raise


def flags(cls: type[T], argv: Optional[Sequence[str]], prog: str) -> T:
    """``cls`` (a dataclass of flags) from ``argv`` (None: sys.argv[1:]) with tyro, as every command of
    the kit reads its flags: a malformed one raised as ``one_line``'s ConfigError, ``--help`` exits 0."""
    args = list(sys.argv[1:] if argv is None else argv)
    return parse_or_refuse(lambda: tyro.cli(cls, prog=prog, args=args), args, prog)


def refuse(prog: str, e: RefimplError) -> int:
    """Print the one-line refusal ``PROG: error: FIELD: ... (limit: ...)`` on stderr; exit status 2."""
    print(f"{prog}: error: {e}", file=sys.stderr)
    return 2
