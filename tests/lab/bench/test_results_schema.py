"""One result schema (refimpl.lab.bench.schema): every committed result validates; bad keys are named;
specs travel as JSON to the fresh-process workers."""
import copy
import json
from pathlib import Path

import pytest

from refimpl.lab.bench.schema import Result, SchemaError, validate

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "results"
# every hardware folder's results and its dated sub-runs (same-day-*/); results/conformance/ has its own format
COMMITTED = sorted(p for p in [*RESULTS.glob("*/*.json"), *RESULTS.glob("*/*/*.json")]
                   if p.relative_to(RESULTS).parts[0] != "conformance")


def test_there_are_committed_results():
    assert COMMITTED


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(RESULTS)))
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
    (lambda d: d["variants"]["0.8.5"].update(runs=[]), "variants['0.8.5'].runs"),
    (lambda d: d["variants"]["0.8.5"]["summary"]["call_1_s"].pop("median"),
     "variants['0.8.5'].summary['call_1_s']"),
    (lambda d: d.update(comparisons=[{"variant": "turbo", "over": "0.8.5", "metric": "s"}]),
     "comparisons[0].variant"),
])
def test_validate_names_the_bad_key(breaks, key):
    d = copy.deepcopy(_good())
    validate(d)
    breaks(d)
    with pytest.raises(SchemaError) as e:
        validate(d)
    assert e.value.key == key


def test_committed_results_use_the_current_row_names():
    """Every committed result is written under the current row names (schema version 2); the 0.1.0
    names survive only in the commands the runs recorded (``_fresh_process.cmd``: as they ran)."""
    from refimpl.variants import LEGACY_NAMES
    for path in COMMITTED:
        d = json.loads(path.read_text())
        if "variants" in d and "bench" in d:
            assert d["schema_version"] == 2, path
            runs = [r.get("variant") for v in d["variants"].values() for r in v["runs"]]
            names = {n.partition("@")[0] for n in [*d["variants"], *filter(None, runs)]}
            assert not names & (set(LEGACY_NAMES) - {"shape-only"}), (path, names & set(LEGACY_NAMES))


def test_a_version_1_result_loads_under_the_current_names():
    """The loader's map (refimpl.variants.legacy_name): a 0.1.0-named file reads as the rows it was."""
    d = _good()
    d["schema_version"] = 1
    old = {"0.8.5": "no-cache", "0.9.0": "cache-reset"}
    d["variants"] = {old[k]: {**v, "runs": [r | {"variant": old[k]} for r in v["runs"]]}
                     for k, v in d["variants"].items()}
    d["params"]["variants"] = [old[v] for v in d["params"]["variants"]]
    res = Result.from_dict(d)
    assert set(res.variants) == {"0.8.5", "0.9.0"} and res.params["variants"] == ["0.8.5", "0.9.0"]
    assert {r["variant"] for r in res.runs("0.9.0")} == {"0.9.0"}
    assert Result.from_dict(_good()).to_dict() == {**res.to_dict(), "params": res.params}


def test_specs_travel_as_json():
    from refimpl.lab.bench.specs import ServeSpec, StartupSpec, WerSpec, spec_from_json, spec_to_json
    for spec in (StartupSpec(variants=("0.8.5", "0.9.0+#19756+#24925+uint8"), limit_mm_per_prompt={"video": 0}, calls=2),
                 ServeSpec(design="paired", variants=("0.10.2", "audios-per-step@4"), budget_s=5.0), WerSpec()):
        assert spec_from_json(spec_to_json(spec)) == spec
