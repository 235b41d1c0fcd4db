"""One command line: every command of the kit reads its flags the same way (tyro, cli_errors.flags /
parse_or_refuse): a malformed or conflicting value is refused before anything runs, in one line
``PROG: error: FIELD: ... (limit: ...)`` naming the field, exit status 2; ``--help`` exits 0 and lists
every flag with its default once."""
import re

import pytest

from refimpl.lab.bench import fresh
from refimpl.lab.cli import main
from refimpl.lab.docs_gen import mechanism_pages, pass_table, reliability_table

# (argv of the dispatcher, the refusal's prefix, the field it names)
REFUSALS = [
    (["bench", "startup", "--max-model-len", "32k"], "refimpl bench startup", "max_model_len"),
    (["bench", "serve", "--repeatz", "2"], "refimpl bench serve", "repeatz"),
    (["bench", "calibrate", "--size-mib", "big"], "refimpl bench calibrate", "size_mib"),
    (["bench", "wer", "--max-new-tokens", "0"], "refimpl bench wer", "max_new_tokens"),
    (["bench", "sweep", "startup", "--params"], "refimpl bench sweep", "params"),
    (["bench", "sweep", "startup", "--dry-run"], "refimpl bench sweep", "params"),  # --params not given
    (["bench", "serve", "--variants"], "refimpl bench serve", "variants"),
    (["bench", "sweep", "turbo", "--params", "x.toml"], "refimpl bench sweep", "bench"),
    (["bench", "sweep", "serve", "--params", "no/such.toml", "--dry-run"], "refimpl bench sweep serve", "params"),
    (["report", "--device", "tpu"], "refimpl report", "device"),
    (["report", "--out-dirr", "x"], "refimpl report", "out_dirr"),
    (["report", "--summary-of", "no/such/folder"], "refimpl report", "summary_of"),
    (["conform"], "refimpl conform", "vllm"),
    (["conform", "--vllm", "0.11.0", "--table"], "refimpl conform", "vllm"),
    (["conform", "--table", "--quick", "yes"], "refimpl conform", "quick"),
    (["cost-check", "--carry-from", "cal.json"], "refimpl cost-check", "carry_from"),
    (["cost-check", "--same-day", "cal.json"], "refimpl cost-check", "same_day"),
]


@pytest.mark.parametrize("argv, prog, field", REFUSALS, ids=[" ".join(a) for a, _, _ in REFUSALS])
def test_a_bad_value_is_one_line_naming_the_field(argv, prog, field, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written: the folder stays empty
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"{prog}: error: {field}: ") and captured.err.count("\n") == 1, captured.err
    assert "(limit: " in captured.err and not captured.out
    assert not any(tmp_path.iterdir())


HELP = [["bench", "startup"], ["bench", "serve"], ["bench", "wer"], ["bench", "calibrate"],
        ["bench", "sweep", "startup"], ["report"], ["conform"], ["cost-check"]]


@pytest.mark.parametrize("argv", HELP, ids=" ".join)
def test_help_lists_every_flag_with_its_default_once(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.lstrip().startswith("usage:")
    flags = re.findall(r"^\s*│?\s*(--[\w-]+)", out, re.M)
    assert len(flags) >= 2, out
    # a default said once: no flag's help carries two "(default" notes
    entries = re.split(r"\n\s*│?\s*(?=--?[\w-]+)", out)
    assert all(entry.count("(default") <= 1 for entry in entries), out


def test_report_help_names_the_defaults_in_words(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "-p" in out and "NAME=VALUE" in out and "(default: reports/latest)" in out


WORKER = ["--spec", "{}", "--variant", "0.9.0", "--output-json", "out.json"]


@pytest.mark.parametrize("module, argv", [(mechanism_pages, []), (pass_table, []), (reliability_table, []),
                                          (fresh, WORKER)], ids=lambda m: getattr(m, "__name__", ""))
def test_the_other_entry_points_refuse_the_same_way(module, argv, capsys):
    """The docs generators (``python -m refimpl.lab.docs_gen.*``) and the fresh-process worker."""
    assert module.main([*argv, "--nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m {module.__name__}: error: nope: ") and err.count("\n") == 1, err
