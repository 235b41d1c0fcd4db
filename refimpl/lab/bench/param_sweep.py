"""A sweep file (refimpl bench sweep, refimpl/lab/bench/sweep.py) read and checked: its tables, each
run's overrides as a spec of the bench, each run's name. vLLM's vllm/benchmarks/sweep/param_sweep.py
(a list, or names to overrides, of parameter records); ours also holds ``experiment``, ``base``,
``calibrate`` and ``warm_up``. Every error is a ConfigError naming the key at fault."""
from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from refimpl.errors import ConfigError
from refimpl.lab.bench.specs import Spec

try:
    import tomllib
except ImportError:  # Python 3.10: tomli where it is installed, else JSON sweep files only
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ImportError:
        tomllib = None  # type: ignore[assignment]

__all__ = ["TOP_KEYS", "RESERVED", "load", "spec_of", "run_name"]

TOP_KEYS = ("experiment", "base", "calibrate", "warm_up", "runs")
NAME = re.compile(r"[\w.+=-]+")
RESERVED = ("calibration", "sweep", "same_day")


def load(path: Path) -> dict[str, Any]:
    """The sweep file as a table of TOP_KEYS (a bare JSON list: its ``runs``); ConfigError on a bad file."""
    if Path(path).suffix == ".toml" and tomllib is None:
        raise ConfigError("params", "a JSON file on Python 3.10 (TOML needs 3.11's tomllib or tomli)", str(path))
    try:
        text = Path(path).read_bytes()
        data = tomllib.loads(text.decode()) if Path(path).suffix == ".toml" else json.loads(text)
    except OSError as e:
        raise ConfigError("params", "a readable TOML or JSON file", f"{path}: {e.strerror}") from None
    except (ValueError, UnicodeDecodeError) as e:  # tomllib.TOMLDecodeError and json's are ValueErrors
        raise ConfigError("params", "a TOML (.toml) or JSON file", f"{path}: {e}") from None
    data = {"runs": data} if isinstance(data, list) else data
    if not isinstance(data, dict):
        raise ConfigError("params", "a table (or a JSON list of runs)", f"{path} holds {type(data).__name__}")
    for key in data:
        if key not in TOP_KEYS:
            raise ConfigError(key, f"a key of a sweep file: {', '.join(TOP_KEYS)}", f"{path} has {key!r}")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
        raise ConfigError("runs", "a non-empty list of tables", f"{path} has {runs!r}")
    for key in ("base", "calibrate", "warm_up"):
        if not isinstance(data.get(key, {}), dict):
            raise ConfigError(key, "a table of overrides", f"{path} has {data[key]!r}")
    if not isinstance(data.get("experiment", ""), str):
        raise ConfigError("experiment", "a string", f"{path} has {data['experiment']!r}")
    return data


def _kind(hint: Any) -> str:
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if get_origin(hint) is Union:
        return " or ".join(_kind(a) for a in get_args(hint) if a is not type(None)) + " (or null)"
    if get_origin(hint) is tuple:
        return f"a list of {_kind(get_args(hint)[0]).split(' ', 1)[1]}s"
    if get_origin(hint) is dict:
        return f"a table of {_kind(get_args(hint)[1]).split(' ', 1)[1]}s"
    return words.get(hint, str(hint))


def _value(hint: Any, v: Any) -> tuple[bool, Any]:
    """(whether ``v`` fits ``hint``, ``v`` as the spec holds it: lists as tuples, ints as floats)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Union:
        return (True, None) if v is None else _value(next(a for a in args if a is not type(None)), v)
    if origin is tuple and isinstance(v, list):
        items = [_value(args[0], x) for x in v]
        return all(ok for ok, _ in items), tuple(x for _, x in items)
    if origin is dict and isinstance(v, dict):
        table = {k: _value(args[1], x) for k, x in v.items()}
        return all(isinstance(k, str) and ok for k, (ok, _) in table.items()), {k: x for k, (_, x) in table.items()}
    if hint is float and isinstance(v, int) and not isinstance(v, bool):
        return True, float(v)
    return isinstance(v, hint) and (hint is bool or not isinstance(v, bool)) if isinstance(hint, type) else False, v


def spec_of(cls: type[Spec], overrides: dict[str, Any], where: str) -> Spec:
    """``cls`` with ``overrides`` (field names, "-" or "_"); ConfigError naming the field otherwise."""
    hints = get_type_hints(cls)
    names = [f.name for f in fields(cls) if f.init]  # type: ignore[arg-type]
    kw = {}
    for key, v in overrides.items():
        name = key.replace("-", "_")
        if name not in names:
            raise ConfigError(name, f"a field of refimpl bench {cls.name}: {', '.join(names)}", f"{where} has {key!r}")
        ok, kw[name] = _value(hints[name], v)
        if not ok:
            raise ConfigError(name, _kind(hints[name]), f"{where} has {v!r}")
    return cls(**kw)


def run_name(entry: dict[str, Any], where: str) -> str:
    """A run's ``name`` (default: its overrides, as vLLM names an unnamed one): a file name, not RESERVED."""
    name = entry.get("name", "-".join(f"{k}={v}" for k, v in entry.items()) or "base")
    name = name if "name" in entry else re.sub(r"[^\w.+=-]+", "_", name)
    if not isinstance(name, str) or not NAME.fullmatch(name) or name in RESERVED:
        raise ConfigError("name", f"letters, digits and . + = - _, not {', '.join(RESERVED)}", f"{where} has {name!r}")
    return name
