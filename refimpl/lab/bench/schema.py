"""The one result schema every bench writes and every table, figure and test reads.

    {"bench", "schema_version": 2, "env": {...}, "params": {...},
     "variants": {name: {"runs": [run, ...], "summary": {metric: summarize(...) or a number}}},
     "missing": [...], "comparisons": [{"variant", "over", "metric", ...}]}   # both optional

``params``: the spec's fields (``interrupted`` / ``failed`` on a partial one); ``missing``: what a
migrated result lacks."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refimpl.lab.bench.common import write_json
from refimpl.variants import legacy_name

__all__ = ["SCHEMA_VERSION", "BENCHES", "SchemaError", "validate", "Result"]

SCHEMA_VERSION = 2
BENCHES = ("startup", "budget", "throughput", "throughput-sweep", "spawn-cost", "paired",
           "workload", "wer", "calibrate",
           # the probes (refimpl/lab/probes/specs.py; spawn-cost above)
           "first-touch", "cache-hit", "cross-attention-read", "cross-attention-fragmentation",
           "engine-vs-generate", "step-ops", "serving-memory", "explorer-ready", "registry-call",
           "encoder-batch")
_TOP = ("bench", "schema_version", "env", "params", "variants")
_OPTIONAL = ("missing", "comparisons")


class SchemaError(ValueError):
    """A result does not follow the schema; ``key`` is the path of the bad key."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


def validate(obj: Any) -> dict:
    """Check ``obj`` against the schema; returns it. Raises SchemaError naming the bad key."""
    if not isinstance(obj, dict):
        raise SchemaError("<result>", f"expected a JSON object, got {type(obj).__name__}")
    for k in _TOP:
        if k not in obj:
            raise SchemaError(k, "missing")
    extra = set(obj) - set(_TOP) - set(_OPTIONAL)
    if extra:
        raise SchemaError(sorted(extra)[0], f"unknown top-level key (allowed: {_TOP + _OPTIONAL})")
    if obj["bench"] not in BENCHES:
        raise SchemaError("bench", f"{obj['bench']!r} is not one of {BENCHES}")
    if obj["schema_version"] not in (1, SCHEMA_VERSION):
        raise SchemaError("schema_version", f"{obj['schema_version']!r} is not 1 or {SCHEMA_VERSION}")
    missing = obj.get("missing", [])
    if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
        raise SchemaError("missing", "expected a list of strings")
    for k in ("env", "params"):
        if not isinstance(obj[k], dict):
            raise SchemaError(k, f"expected an object, got {type(obj[k]).__name__}")
    if "env" not in missing:
        for k in ("hardware", "versions", "device", "in_process"):
            if k not in obj["env"] and f"env.{k}" not in missing:
                raise SchemaError(f"env.{k}", "missing (list it under 'missing' if unknown)")
    variants = obj["variants"]
    if not isinstance(variants, dict) or not variants:
        raise SchemaError("variants", "expected a non-empty object {name: {runs, summary}}")
    for name, v in variants.items():
        where = f"variants[{name!r}]"
        if not isinstance(v, dict) or set(v) != {"runs", "summary"}:
            raise SchemaError(where, "expected exactly the keys 'runs' and 'summary'")
        if not isinstance(v["runs"], list) or not all(isinstance(r, dict) for r in v["runs"]):
            raise SchemaError(f"{where}.runs", "expected a list of objects")
        if not v["runs"] and "runs" not in missing:
            raise SchemaError(f"{where}.runs", "empty (list 'runs' under 'missing' if unknown)")
        if not isinstance(v["summary"], dict):
            raise SchemaError(f"{where}.summary", "expected an object")
        for metric, s in v["summary"].items():
            if isinstance(s, dict) and not {"median", "min", "max", "n"} <= set(s):
                raise SchemaError(f"{where}.summary[{metric!r}]",
                                  "a metric summary needs median, min, max and n")
    for i, c in enumerate(obj.get("comparisons", [])):
        if not isinstance(c, dict) or not {"variant", "over", "metric"} <= set(c):
            raise SchemaError(f"comparisons[{i}]", "needs the keys variant, over and metric")
        for k in ("variant", "over"):
            if c[k] not in variants:
                raise SchemaError(f"comparisons[{i}].{k}", f"{c[k]!r} is not a variant of this result")
    return obj


@dataclass
class Result:
    """One benchmark result in the schema above; ``variants[name]`` is ``{"runs", "summary"}``."""
    bench: str
    env: dict[str, Any]
    params: dict[str, Any]
    variants: dict[str, dict[str, Any]]
    schema_version: int = SCHEMA_VERSION
    missing: list[str] = field(default_factory=list)
    comparisons: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The schema's keys in order; ``missing`` and ``comparisons`` only when not empty."""
        return {k: getattr(self, k) for k in _TOP + _OPTIONAL if k in _TOP or getattr(self, k)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Result":
        """Validate ``d`` and wrap it (a version 1 result with its rows renamed by
        ``refimpl.variants.legacy_name``: variant keys, each run's ``variant``, comparisons and
        ``params.variants``; a run's recorded command stays as it ran). Raises SchemaError."""
        validate(d)
        variants, params, comparisons = d["variants"], d["params"], list(d.get("comparisons", []))
        if d["schema_version"] == 1:
            variants = {legacy_name(k): {**v, "runs": [r | {"variant": legacy_name(r["variant"])} if isinstance(
                r.get("variant"), str) else r for r in v["runs"]]} for k, v in variants.items()}
            comparisons = [c | {k: legacy_name(c[k]) for k in ("variant", "over")} for c in comparisons]
            params = dict(params)
            for k in ("variants", "variant"):
                if isinstance(params.get(k), list):
                    params[k] = [legacy_name(x) for x in params[k]]
                elif isinstance(params.get(k), str):
                    params[k] = ",".join(legacy_name(x) for x in params[k].split(","))
        return cls(d["bench"], d["env"], params, variants, SCHEMA_VERSION,
                   list(d.get("missing", [])), comparisons)

    @classmethod
    def load(cls, path: str | Path) -> "Result":
        """Read and validate a result JSON. Raises OSError, json.JSONDecodeError, SchemaError."""
        return cls.from_dict(json.loads(Path(path).read_text()))

    def write(self, path: str | Path) -> Path:
        """Validate, then write atomically."""
        return write_json(path, validate(self.to_dict()))

    def runs(self, variant: str) -> list[dict[str, Any]]:
        return self.variants[variant]["runs"]

    def values(self, variant: str, key: str) -> list[float]:
        return [r[key] for r in self.runs(variant)]

    @property
    def hardware_name(self) -> str:
        return self.env.get("hardware", {}).get("name", "unknown hardware")
