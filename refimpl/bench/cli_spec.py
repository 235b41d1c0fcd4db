"""Typed bench specs and their flags: one mechanism for every ``refimpl bench`` command.

A bench's spec is a frozen dataclass whose fields are its CLI flags, declared once with
:func:`arg` (default, help, and the limits the field must keep). From that one declaration:

* ``Spec.parser()`` builds the argparse parser (flag ``--field-name`` unless ``arg(flag=...)``
  says otherwise; a tuple field is a comma list, a bool a switch (``--no-x`` when the default
  is True), a dict a repeated ``KEY=N`` flag; a field declared without ``arg`` is no flag)
  plus ``--output-json``;
* ``Spec.parse(argv)`` parses flags into ``(spec, options)`` (options: the flags that are not
  fields, such as ``--output-json``); ``Spec.from_argv(argv)`` into ``(spec, output_json)``.
  Every bench's command line goes through ``parse``, which also refuses, before anything
  runs, what only this machine can tell: a ``device`` absent here (``spec.check_machine()``)
  and an ``--output-json`` path that could not be written at the end
  (``refimpl.bench.common.check_output_json``);
* ``spec.command()`` is the command line that repeats the run, ready to paste: the flags whose
  values differ from the defaults (and the required ones), in field order, then
  ``--output-json <bench>_<model>.json`` (the results' naming) and, for a Result measured in
  one process, ``--in-process`` (results and notebooks print it beside every figure);
* ``Spec.from_params(params)`` rebuilds the spec from a stored Result's ``params`` (the
  inverse of ``spec.params()``; keys that are not fields, such as ``rounds_run``, are left
  out);
* ``__post_init__`` checks every field against its limits (``choices``, for a tuple each item;
  ``min`` for >=, ``gt`` for >; a comma list's items non-empty and distinct) before anything
  runs and raises refimpl's ConfigError naming the field and the limit (UnknownVariantError
  for a variant name); ``refimpl.cli`` prints it and exits 2.

The in-process benches (``paired``, ``workload``, ``wer``) subclass :class:`CliSpec` directly.
The fresh-process benches (``startup``, ``budget``, ``throughput``) subclass
``refimpl.bench.bench_spec.BenchSpec``, itself a CliSpec whose fields are the repeat design
(variants, repeats, warm-up, limits per process), with ``--output-json`` required and
``--in-process``: one way to declare, parse, print and check every bench's flags.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Sequence

from refimpl.errors import ConfigError


def arg(default: Any, help: str = "", *, flag: Optional[str] = None,
        choices: Optional[Sequence] = None, min: Optional[float] = None,
        gt: Optional[float] = None, required: bool = False, metavar: Optional[str] = None) -> Any:
    """A spec field that is also a CLI flag. ``flag``: the flag's name when it is not
    ``--field-name``; ``choices``: allowed values (of each item, for a tuple); ``min`` / ``gt``:
    value >= / > that bound (None values, for optional fields, are not checked); ``required``:
    the flag must be given (``command()`` always prints it); ``metavar``: the value's name in
    ``--help`` (for a dict field also its format, ``KEY=N``)."""
    meta = {"help": help, "flag": flag, "choices": choices, "min": min, "gt": gt,
            "required": required, "metavar": metavar}
    if isinstance(default, dict):  # a mutable default: each spec gets its own copy
        return dataclasses.field(default_factory=lambda: dict(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def comma_list(text: str) -> tuple[str, ...]:
    """``"a, b,c"`` -> ``("a", "b", "c")``; an empty item is kept (``"a,,b"`` -> ``("a", "",
    "b")``) for the spec to refuse (:func:`check_items`), not dropped in silence."""
    return tuple(v.strip() for v in text.split(","))


def check_items(field: str, items: tuple) -> None:
    """Raise ConfigError(field, ...) when a comma list has an empty or a repeated item (a
    variant given twice would be measured against itself)."""
    got = f"got {','.join(map(str, items))!r}"
    if any(isinstance(v, str) and not v for v in items):
        raise ConfigError(field, "distinct, non-empty items", f"an empty item: {got}")
    twice = next((v for i, v in enumerate(items) if v in items[:i]), None)
    if twice is not None:
        raise ConfigError(field, "distinct, non-empty items", f"{twice!r} given twice: {got}")


def int_pairs(field: str, items: Optional[list[str]], form: str = "KEY=N") -> dict[str, int]:
    """``["video=0", "image=2,audio=1"]`` -> ``{"video": 0, "image": 2, "audio": 1}``.
    Raises ConfigError(field, form) on a pair that is not ``KEY=integer``."""
    out = {}
    for it in items or []:
        for pair in it.split(","):
            k, sep, v = pair.partition("=")
            if not sep or not v.strip().lstrip("-").isdigit():
                raise ConfigError(field, form, f"bad value {pair!r}")
            out[k.strip()] = int(v)
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[operator]


@dataclass(frozen=True, kw_only=True)
class CliSpec:
    """Base of every bench spec: ``prog`` (the command), the fields (declared with
    :func:`arg`), and the parsing / printing / checking described in the module doc. The
    parser's description is the bench module's docstring; ``--output-json`` is required when
    ``output_json_required``."""
    prog: ClassVar[str] = ""
    output_json_required: ClassVar[bool] = False
    in_process_flag: ClassVar[bool] = False  # the parser has ``--in-process`` (BenchSpec)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value, m = getattr(self, f.name), f.metadata
            if isinstance(value, list):
                object.__setattr__(self, f.name, value := tuple(value))
            if value is None or not m:
                continue
            if isinstance(value, tuple):
                check_items(f.name, value)
            bad = [v for v in (value if isinstance(value, tuple) else (value,))
                   if m["choices"] is not None and v not in m["choices"]]
            if bad:
                raise ConfigError(f.name, m["choices"], f"got {bad[0]!r}")
            if m["min"] is not None and not value >= m["min"]:
                raise ConfigError(f.name, f">= {m['min']}", f"got {value!r}")
            if m["gt"] is not None and not value > m["gt"]:
                raise ConfigError(f.name, f"> {m['gt']}", f"got {value!r}")

    # -- flags
    @classmethod
    def _flag_fields(cls) -> list[dataclasses.Field]:
        """The fields declared with :func:`arg` (a plain field is no flag)."""
        return [f for f in dataclasses.fields(cls) if f.metadata]

    @classmethod
    def flag(cls, name: str) -> str:
        f = next(f for f in dataclasses.fields(cls) if f.name == name)
        return f.metadata.get("flag") or "--" + name.replace("_", "-")

    @classmethod
    def parser(cls) -> argparse.ArgumentParser:
        """The argparse parser of the spec's flags (defaults = the fields' defaults), plus
        ``--output-json``."""
        p = argparse.ArgumentParser(prog=cls.prog, description=sys.modules[cls.__module__].__doc__,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        hints = typing.get_type_hints(cls)
        for f in cls._flag_fields():
            kind, m = typing.get_origin(hints[f.name]) or hints[f.name], f.metadata
            if kind is typing.Union:  # Optional[X] -> X
                kind = next(a for a in typing.get_args(hints[f.name]) if a is not type(None))
            kw: dict[str, Any] = {"dest": f.name, "default": _default(f), "help": m.get("help")}
            if kind is bool:  # a switch that flips the default
                kw["action"] = "store_false" if f.default else "store_true"
            elif kind is dict:  # repeated KEY=N, turned into the dict by parse()
                kw.update(action="append", default=None, metavar=m.get("metavar"))
            else:
                kw.update(type=comma_list if kind is tuple else kind, metavar=m.get("metavar"))
                if m.get("choices") and kind is not tuple:
                    kw["choices"] = m["choices"]
            p.add_argument(cls.flag(f.name), required=m.get("required", False), **kw)
        p.add_argument("--output-json", default=None, required=cls.output_json_required,
                       help="where to write the result JSON")
        return p

    @classmethod
    def parse(cls, argv: Optional[list[str]]) -> tuple[Any, argparse.Namespace]:
        """``(spec, options)`` from command-line flags; ``options`` holds the flags that are
        not fields (``output_json``, ...). argparse exits 2 on a malformed flag; the spec
        raises ConfigError for a value out of its limits, ``check_machine`` for a device
        absent here, ``refimpl.bench.common.check_output_json`` (field ``output_json``) for
        a path that could not be written: all before anything runs."""
        ns, fields = vars(cls.parser().parse_args(argv)), {}
        for f in cls._flag_fields():
            fields[f.name] = ns.pop(f.name)
            if isinstance(_default(f), dict):
                fields[f.name] = int_pairs(f.name, fields[f.name], f.metadata["metavar"] or "KEY=N")
        spec = cls.from_flags(fields)
        spec.check_machine()
        if ns.get("output_json") is not None:
            from refimpl.bench.common import check_output_json
            check_output_json(ns["output_json"])
        return spec, argparse.Namespace(**ns)

    @classmethod
    def from_argv(cls, argv: Optional[list[str]]):
        """``(spec, output_json)`` from command-line flags (see :meth:`parse`)."""
        spec, options = cls.parse(argv)
        return spec, options.output_json

    @classmethod
    def from_flags(cls, fields: dict[str, Any]):
        """The spec of the parsed flags (a subclass maps flags whose meaning spans fields)."""
        return cls(**fields)

    def check_machine(self) -> None:
        """Checks of this machine rather than of the values: a ``device`` field must name a
        device present here (``refimpl.config.resolve_device`` raises ConfigError for
        'cuda' without CUDA). Called by :meth:`parse`, not by ``__post_init__``, so the spec
        of a Result measured on a GPU still rebuilds on a CPU machine (``from_params``)."""
        device = getattr(self, "device", None)
        if device is not None:
            from refimpl.config import resolve_device
            resolve_device(device)

    def command(self, output_json: Optional[str] = None, in_process: bool = False) -> str:
        """The command line that repeats this spec: ``prog`` and the flags that are required
        or whose values differ from the defaults (a switch as the bare flag), required first,
        then ``--output-json`` (``output_json``, default ``<bench>_<model>.json``, the
        results' naming) and ``--in-process`` when ``in_process`` and the bench has that
        flag. The line runs as printed."""
        out = [self.prog]
        for f in sorted(self._flag_fields(), key=lambda f: not f.metadata["required"]):
            v = getattr(self, f.name)
            if v is None or (v == _default(f) and not f.metadata.get("required")):
                continue
            out.append(self.flag(f.name) if isinstance(v, bool) else f"{self.flag(f.name)} {_fmt(v)}")
        model = self.params().get("model")
        name = "_".join([self.prog.split()[-1], *([model] if model else [])])
        out.append(f"--output-json {output_json or name + '.json'}")
        if in_process and self.in_process_flag:
            out.append("--in-process")
        return " ".join(out)

    # -- results
    def params(self) -> dict[str, Any]:
        """The Result's ``params``: every field (subclasses add the measured design)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_params(cls, params: dict[str, Any]):
        """The spec of a stored Result's ``params`` (fields missing from older results keep
        their defaults; keys that are not fields are left out)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in params.items() if k in names})

    def replace(self, **changes: Any):
        return dataclasses.replace(self, **changes)


def spec_class(bench: str) -> type[CliSpec]:
    """The spec class of ``bench`` (any of ``refimpl bench``: "startup", "paired", ...)."""
    import importlib
    return importlib.import_module(f"refimpl.bench.{bench}").Spec


def command_of(bench: str, params: dict[str, Any], *, in_process: bool = False) -> str:
    """The command line that repeats a stored Result of ``bench`` with these ``params``
    (``in_process``: the Result's ``env["in_process"]``, so a QUICK figure's line says
    ``--in-process``; see ``CliSpec.command``)."""
    return spec_class(bench).from_params(params).command(in_process=in_process)


def max_tokens_limit(model: str) -> int:
    """Most tokens a Whisper request may decode: ``max_target_positions`` (448) minus the
    decoder prompt (refimpl.tokenizer), the bound ``Scheduler.add_request`` enforces."""
    from refimpl.config import get_config_dict
    from refimpl.tokenizer import WHISPER_EN_PROMPT_TOKENS, WHISPER_PROMPT_TOKENS
    prompt = WHISPER_EN_PROMPT_TOKENS if model.endswith(".en") else WHISPER_PROMPT_TOKENS
    return get_config_dict(model)["max_target_positions"] - len(prompt)


def check_max_tokens(field: str, value: int, model: str) -> None:
    """Raise ConfigError(field, limit) when ``value`` tokens exceed :func:`max_tokens_limit`."""
    limit = max_tokens_limit(model)
    if value > limit:
        raise ConfigError(field, f"<= {limit} for {model}", f"got {value}")
