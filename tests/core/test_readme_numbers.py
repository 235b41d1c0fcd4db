"""The README's figures are the committed runs' figures, as the kit computes them (the runs each
names): the release table's medians, the headline start-up medians and ratio, the paired gains."""
import re

import pytest

from refimpl.lab.bench.schema import Result
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.stats import median
from refimpl.lab.studies import startup_tables as T
from refimpl.lab.studies.throughput import rows

README = (REPO_ROOT / "README.md").read_text()
REF = REPO_ROOT / "results/cpu-amd-epyc-2c"


def test_release_table_is_the_committed_release_run():
    res = Result.load(REF / "startup_qwen2.5-vl-3b_release-rows.json")
    table = {m[0]: float(m[1]) for m in re.findall(r"^\| `([\w.+#-]+)` \| ([\d.]+) \[", README, re.M)}
    assert set(table) == set(T.measured(res))
    for v, shown in table.items():
        assert shown == round(median(res.values(v, "total_s")), 1), v
    r = T.ratios(res, 2)["0.9.0 / 0.8.5"]
    assert f"0.9.0 / 0.8.5 here {r['estimate']:.2f} [{r['low']:.2f}, {r['high']:.2f}] in CPU" in README


def test_headline_start_up_is_the_committed_report_run():
    res = Result.load(REF / "startup_qwen2.5-vl-3b.json")
    a, b = (median(res.values(v, "total_s")) for v in ("0.9.0", "0.8.5"))
    r = T.ratios(res)["0.9.0 / 0.8.5"]
    assert f"starts in {b:.1f} s under 0.8.5 and {a:.1f} s under 0.9.0 (**{r['estimate']:.2f}x**, 95% CI" in README
    share = T.hashing_share(res)
    assert f"spends {share['hash_s']:.1f} s" in README and f"the {share['hf_saved_s']:.1f} s of HF calls" in README


@pytest.mark.parametrize("name, pr", [("paired_whisper-tiny.en_registry_runner-config.json", "#24866"),
                                      ("paired_whisper-tiny.en_runner-config_scheduler-config_840s.json", "#24989")])
def test_paired_gains_are_the_committed_runs(name, pr):
    (c,) = [c for c in rows([Result.load(REF / name)])]
    shown = f"**{100 * c['gain']:+.2f}%** [{100 * c['low']:+.2f}, {100 * c['high']:+.2f}] for {pr}"
    assert shown in README.replace("\n  ", " ")
