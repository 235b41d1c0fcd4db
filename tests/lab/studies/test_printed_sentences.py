"""What the start-up, budget and WER tables and ``--help`` print is true of the run: ratios between the
rows asked for (not only against 0.8.5), seconds labelled wall or CPU, no share of a difference inside
the runs' spread, no "predates parts_s" for runs that have it, truncation named, each default once.
Results built from the committed ones: no benchmark runs here."""
import copy
import re

import pytest

from refimpl.lab import cli
from refimpl.lab.bench.schema import Result
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.studies import serving as SV
from refimpl.lab.studies import startup as S
from refimpl.lab.studies import startup_tables as T

STORED = REPO_ROOT / "results/cpu-amd-epyc-2c"
RELEASE = "startup_qwen2.5-vl-3b_release-rows.json"  # its runs record cpu_s and parts_s


def _rows(name: str, *variants: str, scale: dict | None = None) -> Result:
    """The committed ``name`` with only ``variants``, in that order; ``scale[v]`` multiplies v's call 1."""
    res = Result.load(STORED / name)
    out = {v: {"runs": copy.deepcopy(res.runs(v)), "summary": {}} for v in variants}
    for v, f in (scale or {}).items():
        for run in out[v]["runs"]:
            run["calls_s"][0] *= f
            run["parts_s"][0] = {k: x * f for k, x in run["parts_s"][0].items()}
    return Result(res.bench, res.env, dict(res.params), out)


def test_ratios_between_the_rows_asked_for_without_0_8_5():
    res = _rows(RELEASE, "0.9.0", "0.11.1")
    assert list(T.ratios(res)) == ["0.11.1 / 0.9.0"]
    assert "| 0.11.1 / 0.9.0 |" in T.ratios_table(res)
    assert list(T.ratios(_rows(RELEASE, "0.9.0", "0.8.5", "0.11.1"))) == ["0.9.0 / 0.8.5", "0.11.1 / 0.8.5"]


def test_no_split_names_the_missing_rows_not_parts_s():
    res = _rows(RELEASE, "0.9.0", "0.11.1")
    sentence = T.hashing_sentence(res)
    assert "predate" not in sentence and "`0.8.5`" in sentence and "`0.9.0`" not in sentence.split("no runs of")[1]
    assert "more hashing" in T.hashing_sentence(_rows(RELEASE, "0.8.5", "0.9.0"))


def test_seconds_are_labelled_wall_or_cpu():
    res = _rows(RELEASE, "0.8.5", "0.9.0")
    head = T.medians_table(res).splitlines()[0]
    assert "start-up wall s" in head and "CPU s" in head
    assert "start-up CPU s" in T.ratios_table(res)
    old = Result.load(STORED / "startup_qwen2.5-vl-3b.json")  # wall only: no CPU column, wall ratios
    assert "CPU s" not in T.medians_table(old).splitlines()[0] and "start-up wall s" in T.ratios_table(old)


def test_budget_ratio_between_any_two_rows_and_no_share_inside_the_spread():
    budget = "budget_qwen2.5-vl-3b.json"
    apart = S.summary_md(_rows("startup_qwen2.5-vl-3b.json", "0.8.5", "0.9.0"), _rows(budget, "0.8.5", "0.9.0"))
    assert "Call 1, 0.9.0 / 0.8.5 (wall s)" in apart and "**hashing**" in apart and "share of difference" in apart
    # 0.9.0 scaled to 0.8.5's call 1: a difference inside the runs' spread gets no share, no percentage
    same = _rows(budget, "0.8.5", "0.9.0")
    f = T.median([r["calls_s"][0] for r in same.runs("0.8.5")]) / T.median([r["calls_s"][0] for r in same.runs("0.9.0")])
    text = T.call1_explained(_rows(budget, "0.8.5", "0.9.0", scale={"0.9.0": f}))
    assert "within the spread of the runs" in text and not re.search(r"[+-]\d+%", text)
    swapped = S.budget_md(_rows(budget, "0.9.0", "0.8.5"))
    assert "Call 1, 0.9.0 / 0.8.5" in swapped  # the finding's direction when both rows are there
    assert S.budget_pair(_rows(budget, "0.9.0")) is None


def test_wer_names_the_truncation_that_drives_it():
    res = Result.load(STORED / "wer_whisper-tiny.en.json")
    res.params["max_new_tokens"] = 8
    for x in res.runs("whisper-tiny.en"):
        x["tokens"] = 8 if x["clip"] != "clip5_train" else 5
    note = SV.wer_table(res)
    assert "**Truncated**: 5 of 6 outputs stopped at the 8-token cap" in note and "clip5_train" not in note.split("cap")[1]
    for x in res.runs("whisper-tiny.en"):
        x["tokens"] = 5
    assert "Truncated" not in SV.wer_table(res)


@pytest.mark.parametrize("bench", ["startup", "serve", "wer", "calibrate"])
def test_help_shows_each_default_once(bench, capsys):
    with pytest.raises(SystemExit):
        cli.parse([bench, "--help"])
    text = re.sub(r"[│╭╮╰╯─]", " ", capsys.readouterr().out)
    options: list[str] = []
    for line in text.splitlines():  # an option's help runs on until the next line that starts a flag
        if line.strip().startswith("-"):
            options.append(line)
        elif options:
            options[-1] += " " + line
    assert len(options) > 3
    twice = [o.split()[0] for o in options if o.count("(default:") > 1]
    assert not twice, twice
    assert "(default: None)" not in " ".join(text.split())


def test_no_hashing_share_of_a_saving_inside_the_spread():
    res = _rows(RELEASE, "0.8.5", "0.9.0")
    assert T.hashing_share(res)["share"] > 1
    for run in res.runs("0.9.0"):  # 0.9.0's HF time with items as 0.8.5's: nothing saved beyond the spread
        run["parts_s"]["hf_processor_s"] = res.runs("0.8.5")[0]["parts_s"]["hf_processor_s"] + (
            run["parts_s"].get("hf_text_only_s") or 0.0)
    assert T.hashing_share(res)["share"] is None
    assert "within the spread of the runs" in T.hashing_sentence(res) and "%" not in T.hashing_sentence(res)
