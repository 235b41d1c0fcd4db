"""One result schema (refimpl.bench.schema): every committed result validates; bad keys are named;
specs travel as JSON; README's flags still build the same specs."""
import copy
import json
from pathlib import Path

import pytest

from refimpl.bench.bench_spec import spec_from_json
from refimpl.bench.schema import Result, SchemaError, validate

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted((ROOT / "results").glob("*/*.json"))


def test_there_are_committed_results():
    assert COMMITTED


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_committed_result_validates(path):
    res = Result.load(path)
    for v in res.variants.values():
        assert v["runs"] or "runs" in res.missing


def _good():
    return json.loads((ROOT / "results/cpu-intel-xeon-2c/budget_qwen2.5-vl-3b.json").read_text())


@pytest.mark.parametrize("breaks,key", [
    (lambda d: d.pop("params"), "params"),
    (lambda d: d.update(by_variant={}), "by_variant"),
    (lambda d: d.update(schema_version=0), "schema_version"),
    (lambda d: d["env"].pop("hardware"), "env.hardware"),
    (lambda d: d["variants"]["no-cache"].update(runs=[]), "variants['no-cache'].runs"),
    (lambda d: d["variants"]["no-cache"]["summary"]["call_1_s"].pop("median"),
     "variants['no-cache'].summary['call_1_s']"),
    (lambda d: d.update(comparisons=[{"variant": "turbo", "over": "no-cache", "metric": "s"}]),
     "comparisons[0].variant"),
])
def test_validate_names_the_bad_key(breaks, key):
    d = copy.deepcopy(_good())
    validate(d)
    breaks(d)
    with pytest.raises(SchemaError) as e:
        validate(d)
    assert e.value.key == key


def test_spec_json_roundtrip_and_cli_flags_build_specs():
    from refimpl.bench import budget, startup, throughput
    spec, out = startup.StartupSpec.from_argv(
        ["--model", "qwen2.5-vl-3b", "--variant", "0.8.5,0.9.2", "--repeats", "2",
         "--limit-mm-per-prompt", "video=0", "--max-model-len", "20000", "--output-json", "x"])
    assert spec.variants == ("0.8.5", "0.9.2") and spec.limit_mm_per_prompt == {"video": 0} and out == "x"
    assert spec_from_json(spec.to_json()) == spec
    b = budget.BudgetSpec(calls=3)
    assert spec_from_json(b.to_json()) == b and b.variants == ("0.8.5", "0.9.0")
    t, _ = throughput.ThroughputSpec.from_argv(["--engine", "hf", "--num-requests", "8", "--output-json", "x"])
    assert t.variants == ("hf-generate",) and spec_from_json(t.to_json()) == t


def test_spec_refuses_unknown_variant():
    from refimpl.bench.startup import StartupSpec
    from refimpl.errors import UnknownVariantError
    with pytest.raises(UnknownVariantError, match="variant"):
        StartupSpec(variants=("turbo",))
