"""``refimpl probe NAME [FLAGS] [--output-json PATH]``: one probe (refimpl.lab.probes.PROBES) on the
dispatcher of ``refimpl bench``: tyro flags from the probe's spec, the one-line refusal
(``refimpl probe NAME: error: FIELD: ... (limit: ...)``) before anything runs, the Result written as JSON."""
from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path
from typing import Annotated, Optional

import tyro

from refimpl.errors import ConfigError, RefimplError
from refimpl.lab.cli_errors import parse_or_refuse
from refimpl.lab.probes import PROBES, probe_function
from refimpl.lab.probes.specs import ProbeSpec

__all__ = ["parse", "default_out", "shown", "main"]

OUT = Annotated[Optional[str], tyro.conf.arg(help="where to write the Result",
                                             help_behavior_hint="(default: reports/probe_<name>_<UTC time>.json)")]


def _entry(cls: type[ProbeSpec]):
    def probe(spec, output_json=None):
        return spec, output_json
    probe.__annotations__ = {"spec": Annotated[cls, tyro.conf.arg(name="")], "output_json": OUT}
    probe.__doc__ = cls.__doc__
    return probe


def parse(argv: list[str]) -> tuple[ProbeSpec, Optional[str]]:
    """(spec, output_json) of ``refimpl probe`` flags; ConfigError naming the field for a malformed one;
    ``--help`` exits 0."""
    try:
        return parse_or_refuse(lambda: tyro.extras.subcommand_cli_from_dict(
            {n: _entry(c) for n, (c, _) in PROBES.items()}, prog="refimpl probe", args=argv), argv)
    except ConfigError as e:
        if e.field == "bench":  # cli_errors names a missing or unknown subcommand "bench"
            raise ConfigError("probe", ", ".join(PROBES), e.message) from None
        raise ConfigError(e.field, str(e.limit).replace("refimpl bench", "refimpl probe"), e.message) from None


def default_out(spec: ProbeSpec) -> Path:
    """reports/probe_<name>_<UTC time>.json"""
    return Path("reports") / f"probe_{spec.name}_{_dt.datetime.now(_dt.timezone.utc):%Y%m%dT%H%M%SZ}.json"


def shown(res) -> str:
    """Each variant's summary, one line per variant: a metric's median [min, max] (n), a number as it is."""
    def one(v) -> str:
        if isinstance(v, dict):
            return f"{v['median']:.4g} [{v['min']:.4g}, {v['max']:.4g}] (n={v['n']})"
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    return "\n".join(f"{name}: " + ", ".join(f"{k} {one(v)}" for k, v in d["summary"].items())
                     for name, d in res.variants.items())


def main(argv: Optional[list[str]] = None) -> int:
    """``refimpl probe NAME [FLAGS]``: 0; 2 on a refusal (one line)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name = f"refimpl probe{' ' + argv[0] if argv[:1] and argv[0] in PROBES else ''}"
    try:
        spec, out = parse(argv)
        spec.check()
        from refimpl.lab.bench.guard import check_output
        path = check_output(out) if out else default_out(spec)
        res = probe_function(spec.name)(spec)
    except RefimplError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return 2
    res.write(path)
    print(shown(res))
    print(f"wrote {path}")
    return 0
