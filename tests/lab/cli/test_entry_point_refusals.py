"""The same bad values at every entry point: the CLI, the Python API (``trial.run``), an oracle,
the explorer and the report each refuse with a refimpl error, in one line, naming the field, before
anything runs (the table of issue 44; docs/testing.md "Bad settings at every entry point")."""
from __future__ import annotations

import pytest

from refimpl.errors import ConfigError, RefimplError
from refimpl.lab import report
from refimpl.lab.bench import trial
from refimpl.lab.bench.specs import StartupSpec
from refimpl.lab.cli import main
from refimpl.lab.explore.explorer import Settings, explore
from refimpl.testing import max_tokens_per_item

QWEN = "qwen2.5-vl-3b"
# (the value as Python passes it, as the command line and `-p NAME=VALUE` spell it)
BAD_MAX_MODEL_LEN = [("32k", "32k"), ("32768", "'32768'"), (0, "0"), (2.5, "2.5"), (-5, "-5")]


@pytest.fixture
def nothing_runs(monkeypatch):
    monkeypatch.setattr(trial, "executor", lambda *a: pytest.fail("ran despite a bad value"))
    monkeypatch.setattr(report, "execute", lambda *a, **k: pytest.fail("ran despite a bad value"))


def _one_line(err: str, prefix: str, field: str) -> None:
    assert err.startswith(f"{prefix}: error: {field}:") and err.count("\n") == 1 and "(limit: " in err, err


@pytest.mark.parametrize("value, spelled", BAD_MAX_MODEL_LEN, ids=[s for _, s in BAD_MAX_MODEL_LEN])
def test_a_bad_max_model_len_is_refused_alike_everywhere(value, spelled, nothing_runs, capsys, tmp_path):
    if not spelled.startswith("'"):  # the shell passes text: no quotes to tell "32768" from 32768
        assert main(["bench", "startup", "--max-model-len", spelled, "--output-json", str(tmp_path / "x.json")]) == 2
        _one_line(capsys.readouterr().err, "refimpl bench startup", "max_model_len")
    with pytest.raises(ConfigError) as e:  # the Python API: the guard, not a TypeError further on
        trial.run(StartupSpec(max_model_len=value), out=tmp_path / "y.json")
    assert e.value.field == "max_model_len"
    with pytest.raises(ConfigError) as e:  # an oracle
        max_tokens_per_item(QWEN, "0.9.0", max_model_len=value)
    assert e.value.field == "max_model_len"
    out = explore(Settings(max_model_len=value))  # the explorer shows the refusal, never raises
    assert out.error is not None and out.error.split(": ", 1)[1].startswith("max_model_len:") and "\n" not in out.error
    assert report.main(["-p", f"MAX_MODEL_LEN={spelled}", "--out-dir", str(tmp_path / "r")]) == 2
    _one_line(capsys.readouterr().err, "refimpl report", "MAX_MODEL_LEN")
    assert not (tmp_path / "r").exists() and not (tmp_path / "y.json").exists()


@pytest.mark.parametrize("field, value", [("repeats", "2"), ("repeats", 2.5), ("warmup", "no"),
                                          ("variants", "0.9.0"), ("limit_mm_per_prompt", {"video": "0"}),
                                          ("calls", True), ("model", 3)])
def test_a_spec_field_of_another_type_is_a_config_error_naming_it(field, value, nothing_runs, tmp_path):
    """Types are checked where the guard checks values: a refimpl error, not a bare TypeError."""
    with pytest.raises(RefimplError) as e:
        trial.run(StartupSpec().replace(**{field: value}), out=tmp_path / "x.json")
    assert e.value.field == field and str(e.value).count("\n") == 0


def test_good_values_pass_the_type_check():
    import numpy as np

    from refimpl.lab.bench.spec_types import check_types
    check_types(StartupSpec(max_model_len=np.int64(4096), variants=["0.8.5", "0.9.0"], calls=None))


def test_a_report_parameter_named_as_a_spec_field_gets_its_type(capsys, nothing_runs, tmp_path):
    assert report.main(["-p", "REPEATS=two", "--out-dir", str(tmp_path / "r")]) == 2
    _one_line(capsys.readouterr().err, "refimpl report", "REPEATS")
    assert report.main(["-p", "MAX_MODEL_LEN=None", "--notebooks", "nope.ipynb"]) == 2  # None: the model's
    assert "notebooks" in capsys.readouterr().err
