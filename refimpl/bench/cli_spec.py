"""Typed specs of the in-process benches (``paired``, ``workload``, ``wer``) and their flags.

A bench's spec is a frozen dataclass whose fields are its CLI flags, declared once with
:func:`arg` (default, help, and the limits the field must keep). From that one declaration:

* ``Spec.parser()`` builds the argparse parser (flag ``--field-name`` unless ``arg(flag=...)``
  says otherwise; a tuple field is a comma list, a bool a switch) plus ``--output-json``;
* ``Spec.from_argv(argv)`` parses flags into ``(spec, output_json)``;
* ``spec.command()`` is the command line that repeats the run: the flags whose values differ
  from the defaults, in field order (results and notebooks print it beside every figure);
* ``Spec.from_params(params)`` rebuilds the spec from a stored Result's ``params`` (the
  inverse of ``spec.params()``; keys that are not fields, such as ``rounds_run``, are left
  out);
* ``__post_init__`` checks every field against its limits (``choices``, ``min`` for >=, ``gt``
  for >) before anything runs and raises refimpl's ConfigError naming the field and the limit
  (UnknownVariantError for a variant name); ``refimpl.cli`` prints it and exits 2.

The start-up / budget / throughput benches use ``refimpl.bench.orchestrate.BenchSpec``
(fresh-process repeats); these three measure in one process and share no repeat fields.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from refimpl.errors import ConfigError


def arg(default: Any, help: str = "", *, flag: Optional[str] = None,
        choices: Optional[tuple] = None, min: Optional[float] = None,
        gt: Optional[float] = None) -> Any:
    """A spec field that is also a CLI flag. ``flag``: the flag's name when it is not
    ``--field-name``; ``choices``: allowed values; ``min`` / ``gt``: value >= / > that bound
    (None values, for optional fields, are not checked)."""
    return dataclasses.field(default=default, metadata={
        "help": help, "flag": flag, "choices": choices, "min": min, "gt": gt})


def comma_list(text: str) -> tuple[str, ...]:
    """``"a, b,c"`` -> ``("a", "b", "c")`` (empty items dropped)."""
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _fmt(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass(frozen=True, kw_only=True)
class CliSpec:
    """Base of the in-process bench specs: ``prog`` (the command), the fields (declared with
    :func:`arg`), and the parsing / printing / checking described in the module doc. The
    parser's description is the bench module's docstring."""
    prog: ClassVar[str] = ""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value, m = getattr(self, f.name), f.metadata
            if isinstance(value, list):
                object.__setattr__(self, f.name, value := tuple(value))
            if value is None or not m:
                continue
            if m["choices"] is not None and value not in m["choices"]:
                raise ConfigError(f.name, m["choices"], f"got {value!r}")
            if m["min"] is not None and not value >= m["min"]:
                raise ConfigError(f.name, f">= {m['min']}", f"got {value!r}")
            if m["gt"] is not None and not value > m["gt"]:
                raise ConfigError(f.name, f"> {m['gt']}", f"got {value!r}")

    # -- flags
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
        for f in dataclasses.fields(cls):
            kind = hints[f.name]
            if typing.get_origin(kind) is typing.Union:  # Optional[X] -> X
                kind = next(a for a in typing.get_args(kind) if a is not type(None))
            kw: dict[str, Any] = {"dest": f.name, "default": f.default, "help": f.metadata.get("help")}
            if kind is bool:
                kw["action"] = "store_true"
            else:
                kw["type"] = comma_list if typing.get_origin(kind) is tuple else kind
                if f.metadata.get("choices") and typing.get_origin(kind) is not tuple:
                    kw["choices"] = f.metadata["choices"]
            p.add_argument(cls.flag(f.name), **kw)
        p.add_argument("--output-json", default=None, help="where to write the result JSON")
        return p

    @classmethod
    def from_argv(cls, argv: Optional[list[str]]):
        """``(spec, output_json)`` from command-line flags. argparse exits 2 on a malformed
        flag; the spec raises ConfigError for a value out of its limits."""
        ns = vars(cls.parser().parse_args(argv))
        out = ns.pop("output_json")
        return cls(**ns), out

    def command(self) -> str:
        """The command line that repeats this spec: ``prog`` and the flags whose values
        differ from the defaults (a true switch as the bare flag)."""
        out = [self.prog]
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v == f.default or v is None or v is False:
                continue
            out.append(self.flag(f.name) if v is True else f"{self.flag(f.name)} {_fmt(v)}")
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
    """The spec class of ``bench`` ("paired", "workload" or "wer")."""
    import importlib
    return importlib.import_module(f"refimpl.bench.{bench}").Spec


def command_of(bench: str, params: dict[str, Any]) -> str:
    """The command line that repeats a stored Result of ``bench`` with these ``params``."""
    return spec_class(bench).from_params(params).command()


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
