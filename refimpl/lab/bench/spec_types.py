"""The types of a bench spec's fields, checked where the guard checks their values: a Python caller's
``StartupSpec(max_model_len="32768")`` or ``repeats=2.5`` is refused with a ConfigError naming the
field and the type, not a bare TypeError from a comparison further on. The CLI's flags arrive typed
(tyro parses them); this is the same refusal for ``trial.run``, the studies and the notebooks."""
from __future__ import annotations

import dataclasses
import numbers
import types
import typing
from typing import Any, Literal, Union

from refimpl.errors import ConfigError

__all__ = ["check_types", "conforms", "field_types", "type_name"]


def conforms(value: Any, tp: Any) -> bool:
    """Whether ``value`` is of annotation ``tp`` (unknown annotations pass: the value checks judge)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return True
    if tp is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if origin is Literal:
        return value in args
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if origin in (tuple, list):
        if not isinstance(value, (tuple, list)):
            return False
        item = args[0] if args else Any
        return all(conforms(v, item) for v in value)
    if origin is dict:
        if not isinstance(value, dict):
            return False
        k, v = args or (Any, Any)
        return all(conforms(a, k) and conforms(b, v) for a, b in value.items())
    return True


def type_name(tp: Any) -> str:
    """``int``, ``int or None``, ``a sequence of str``, ``a dict of str to int``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if tp is type(None):
        return "None"
    if origin in (tuple, list):
        return f"a sequence of {type_name(args[0]) if args else 'values'}"
    if origin is dict:
        return f"a dict of {type_name(args[0])} to {type_name(args[1])}" if args else "a dict"
    return getattr(tp, "__name__", str(tp))


def check_types(spec: Any) -> None:
    """ConfigError(field, the field's type, what was given) for the first field of the dataclass
    ``spec`` whose value is not of its annotated type."""
    hints = typing.get_type_hints(type(spec))
    for f in dataclasses.fields(spec):
        value = getattr(spec, f.name)
        if f.name in hints and not conforms(value, hints[f.name]):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise ConfigError(f.name, type_name(hints[f.name]), f"got {shown} ({type(value).__name__})")


def field_types() -> dict[str, Any]:
    """{field: annotation} over every bench spec (the first spec that has the field): what a notebook
    parameter of the same name (upper-cased, ``MAX_MODEL_LEN``) must be."""
    from refimpl.lab.bench.specs import SPECS
    out: dict[str, Any] = {}
    for cls in SPECS.values():
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            out.setdefault(f.name, typing.get_type_hints(cls)[f.name])
    return out
