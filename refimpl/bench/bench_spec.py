"""``BenchSpec``: the typed spec every fresh-process bench (``startup``, ``budget``,
``throughput``) subclasses, and its JSON form for the worker processes.

A BenchSpec is a ``refimpl.bench.cli_spec.CliSpec`` (flags, ``command()``, ``from_params`` and
limit checks come from the field declarations) with the fields these benches share: the
variants measured side by side (:func:`variants_arg`), repeats, device, warm-up, the limit per
fresh process and the wait for memory. ``to_json`` / :func:`spec_from_json` carry a spec to
``refimpl.bench.worker``; the drivers that run it are in ``refimpl/bench/orchestrate.py``.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from refimpl.bench.cli_spec import CliSpec, arg, check_items


def variants_arg(default: tuple[str, ...], choices: Sequence[str]) -> Any:
    """The ``variants`` field of a bench: flag ``--variant``, one name or a comma list of
    ``choices`` measured side by side (``BenchSpec.__post_init__`` checks each name)."""
    return arg(default, f"one of {', '.join(choices)}, or a comma list measured side by side",
               flag="--variant", choices=tuple(choices))


@dataclass(frozen=True, kw_only=True)
class BenchSpec(CliSpec):
    """Fields every fresh-process benchmark shares: variants (measured side by side), repeats
    per variant, device, an untimed warm-up, the limit per fresh process (seconds), and how
    long a run may wait for memory that others hold before it is refused (seconds; see
    ``_measure``). A CliSpec (refimpl.bench.cli_spec: flags, ``command()``, ``from_params``
    and the limits come from these declarations), with ``--output-json`` required and
    ``--in-process``; each subclass sets ``bench`` and ``prog`` and declares ``variants``
    with :func:`variants_arg`."""
    bench: ClassVar[str] = ""
    output_json_required: ClassVar[bool] = True
    in_process_flag: ClassVar[bool] = True
    variants: tuple[str, ...] = variants_arg((), ())
    repeats: int = arg(3, "timed runs per variant, each a fresh process", min=1)
    device: str = arg("auto", choices=("auto", "cpu", "cuda"))
    warmup: bool = arg(True, "skip the untimed warm-up process", flag="--no-warmup")
    timeout_s: float = arg(1800.0, "limit per fresh process (s)", gt=0)
    memory_wait_s: float = arg(300.0, "how long a run waits for memory others hold before it "
                               "is refused (s)", min=0)

    def __post_init__(self):
        from refimpl.errors import ConfigError, UnknownVariantError
        object.__setattr__(self, "variants", tuple(self.variants))
        choices = self.variant_choices()
        if not self.variants:
            raise ConfigError("variants", choices, "no variant given")
        check_items("variants", self.variants)
        for v in self.variants:
            if v not in choices:
                raise UnknownVariantError("variant", choices, f"unknown variant {v!r}")
        super().__post_init__()

    @classmethod
    def variant_choices(cls) -> tuple[str, ...]:
        """The variant names this bench measures (the ``variants`` field's choices)."""
        return next(f for f in dataclasses.fields(cls) if f.name == "variants").metadata["choices"]

    @classmethod
    def parser(cls) -> argparse.ArgumentParser:
        """The CliSpec parser plus ``--in-process`` (not a field: how, not what, to measure)."""
        p = super().parser()
        p.add_argument("--in-process", action="store_true",
                       help="run the repeats in this process (test/QUICK mode only: not fresh-process figures)")
        return p

    def to_json(self) -> str:
        return json.dumps({"bench": self.bench, "spec": dataclasses.asdict(self)})

    def worker_env(self) -> dict[str, str]:
        """Environment variables set in every fresh worker process of this spec (none here;
        the start-up spec turns numpy's huge-page madvise off)."""
        return {}


def bench_module(bench: str):
    """The module of benchmark ``bench`` (``refimpl.bench.<bench>``)."""
    return importlib.import_module(f"refimpl.bench.{bench}")


def spec_from_json(text: str) -> BenchSpec:
    """Inverse of ``BenchSpec.to_json``. Raises KeyError / TypeError for a malformed spec."""
    d = json.loads(text)
    mod = bench_module(d["bench"])
    fields = {f.name: f for f in dataclasses.fields(mod.Spec)}
    kw = {k: tuple(v) if isinstance(v, list) and k in fields else v for k, v in d["spec"].items()}
    return mod.Spec(**kw)
