"""The command line and the README's commands, from a clean clone of HEAD."""
from pathlib import Path

import pytest

from refimpl.errors import UnknownVariantError
from refimpl.lab.bench import trial
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import StartupSpec
from refimpl.lab.cli import SHOWN, main

ROOT = Path(__file__).resolve().parents[3]


def test_help_and_unknown_command(capsys):
    assert main(["--help"]) == 0
    assert "bench startup" in capsys.readouterr().out
    assert main([]) == 2 and main(["nope"]) == 2


def test_unknown_variant_names_the_field_the_bench_and_the_choices(tmp_path, capsys):
    with pytest.raises(UnknownVariantError, match="variants: unknown variant 'turbo' of refimpl bench startup"):
        trial.run(StartupSpec(variants=("turbo",)))  # Python callers get the exception
    assert main(["bench", "startup", "--variants", "turbo", "--output-json", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refimpl bench startup: error: variants: unknown variant 'turbo' of refimpl bench startup")
    assert "'0.8.5', '0.9.0'" in err and not (tmp_path / "x.json").exists()


SHOWN_RESULTS = [p for p in sorted((ROOT / "results").glob("*/*.json")) if Result.load(p).bench in SHOWN]


@pytest.mark.parametrize("path", SHOWN_RESULTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_bench_shows_its_result_whole_or_without_runs(path):
    """What `refimpl bench` prints at its end (the notebooks' tables), for each committed Result and
    for the same Result interrupted before its first run."""
    res = Result.load(path)
    assert SHOWN[res.bench](res).strip()
    none = Result(res.bench, res.env, {**res.params, "interrupted": True},
                  {v: {"runs": [], "summary": {}} for v in res.variants}, missing=["runs"])
    assert SHOWN[res.bench](none).strip()
