"""The README's figures and docs/findings.md's (the README's detail, moved there) are the committed
runs' figures, as the kit computes them (the runs each names): the README's "which figure to quote"
table, the release table's medians, the headline start-up medians and ratio, the paired gains."""
import re

import pytest

from refimpl.lab.bench.schema import Result
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.stats import median
from refimpl.lab.studies import startup_tables as T
from refimpl.lab.studies.throughput import rows

README = (REPO_ROOT / "README.md").read_text()
FINDINGS = (REPO_ROOT / "docs/findings.md").read_text()
REF = REPO_ROOT / "results/cpu-amd-epyc-2c"
H200 = REPO_ROOT / "results/gpu-nvidia-h200"


def _ci(c: dict) -> str:
    return f"{c['estimate']:.2f}x [{c['low']:.2f}, {c['high']:.2f}]"


def _row(question: str) -> list[str]:
    """The cells of the README table's row ``question``."""
    (line,) = [ln for ln in README.splitlines() if ln.startswith(f"| {question} |")]
    return [c.strip().replace("**", "") for c in line.strip("|").split("|")]


def test_the_quote_table_is_the_committed_runs():
    """Each row of the README's "which 0.9.0 / 0.8.5 figure to quote" table: the ratio of the run it names."""
    from refimpl.lab.studies import gpu
    from refimpl.lab.studies.startup_regime import committed_settings
    ratio = lambda f: T.ratios(Result.load(REF / f), 2)["0.9.0 / 0.8.5"]  # noqa: E731
    assert _ci(ratio("startup_qwen2.5-vl-3b.json")) in _row("one fresh start-up")[1]
    assert _ci(ratio("startup_qwen2.5-vl-3b_release-rows.json")) in _row("the same, in CPU seconds")[1]
    call1 = T.call1_ratio(Result.load(REF / "budget_qwen2.5-vl-3b.json"), min_n=2)
    assert _ci(call1) in _row("the first budget call")[1]
    off = "same-day-2026-12-04-no-reporting-3/startup_qwen2.5-vl-3b_release-rows_128k_2026-12-04.json"
    assert _ci(ratio(off)) in _row("as on bare metal")[1]
    start = {r["variant"]: r for r in gpu.startup_rows("qwen2.5-vl-3b", "cpu-amd-epyc-2c")}
    h200 = median(start["0.9.0"]["total_s"]) / median(start["0.8.5"]["total_s"])
    assert _row("on a GPU host")[1] == f"{h200:.2f}x" and f"**{h200:.2f}x**" in README
    (at50k,) = [s for s in committed_settings() if s.max_model_len == 50000 and not s.limits]
    est = [c["estimate"] for c in at50k.ratios]
    assert _row("a smaller setting")[1] == f"{min(est):.2f}x to {max(est):.2f}x"
    assert _row("a smaller setting")[2] == f"50000 tokens, {len(est)} ladders"
    assert f"0.9.0 / 0.8.5 = **{ratio('startup_qwen2.5-vl-3b.json')['estimate']:.2f}x**" in README


def test_release_table_is_the_committed_release_run():
    res = Result.load(REF / "startup_qwen2.5-vl-3b_release-rows.json")
    table = {m[0]: float(m[1]) for m in re.findall(r"^\| `([\w.+#-]+)` \| ([\d.]+) \[", FINDINGS, re.M)}
    assert set(table) == set(T.measured(res))
    for v, shown in table.items():
        assert shown == round(median(res.values(v, "total_s")), 1), v
    r = T.ratios(res, 2)["0.9.0 / 0.8.5"]
    assert f"0.9.0 / 0.8.5 here {r['estimate']:.2f} [{r['low']:.2f}, {r['high']:.2f}] in CPU" in FINDINGS


def test_headline_start_up_is_the_committed_report_run():
    res = Result.load(REF / "startup_qwen2.5-vl-3b.json")
    a, b = (median(res.values(v, "total_s")) for v in ("0.9.0", "0.8.5"))
    r = T.ratios(res)["0.9.0 / 0.8.5"]
    assert f"starts in {b:.1f} s under 0.8.5 and {a:.1f} s under 0.9.0 (**{r['estimate']:.2f}x**, 95% CI" in FINDINGS
    share = T.hashing_share(res)
    assert f"spends {share['hash_s']:.1f} s" in FINDINGS and f"the {share['hf_saved_s']:.1f} s of HF calls" in FINDINGS


@pytest.mark.parametrize("name, pr", [("paired_whisper-tiny.en_registry_runner-config.json", "#24866"),
                                      ("paired_whisper-tiny.en_runner-config_scheduler-config_840s.json", "#24989")])
def test_paired_gains_are_the_committed_runs(name, pr):
    (c,) = [c for c in rows([Result.load(REF / name)])]
    shown = f"**{100 * c['gain']:+.2f}%** [{100 * c['low']:+.2f}, {100 * c['high']:+.2f}] for {pr}"
    assert shown in README.replace("\n", " ") and shown in FINDINGS.replace("\n  ", " ")


def test_gpu_figures_are_the_committed_h200_runs():
    """docs/findings.md's GPU section (the README's GPU gain too): paired gains, step times, registry shares and start-up medians of
    results/gpu-nvidia-h200/, as refimpl.lab.studies.gpu computes them."""
    from refimpl.lab.studies import gpu
    text = FINDINGS.replace("\n  ", " ")
    (a, b) = rows([Result.load(H200 / "paired_whisper-large-v3.json")])
    assert f"**{100 * b['gain']:+.2f}%** [{100 * b['low']:+.2f}, {100 * b['high']:+.2f}] for #24989" in README
    for c, pr in ((a, "#24866"), (b, "#24989")):
        assert f"{100 * c['gain']:+.2f}% [{100 * c['low']:+.2f}, {100 * c['high']:+.2f}] for {pr}" in text
    reg = {r["variant"]: r for r in gpu.registry_rows() if r["file"] == "paired_whisper-large-v3.json"}
    assert f"steps in {reg['0.10.2']['step_ms']:.1f} ms (0.10.2) to {reg['0.11.0']['step_ms']:.1f} ms (0.11.0)" in text
    assert f"costs {reg['0.10.2']['call_ms']:.1f} ms" in text
    assert f"**{100 * reg['0.10.2']['share']:.1f}%** of 0.10.2's wall time and " \
           f"{100 * reg['0.10.2+#24866']['share']:.1f}% of 0.10.2+#24866's" in text
    start = {r["variant"]: r for r in gpu.startup_rows("qwen2.5-vl-3b", "cpu-amd-epyc-2c")}
    assert f"0.8.5 {median(start['0.8.5']['total_s']):.1f} s, 0.9.0 {median(start['0.9.0']['total_s']):.1f} s" in text
    assert f"0.11.1 {median(start['0.11.1']['total_s']):.1f} s and `refimpl` {median(start['refimpl']['total_s']):.1f} s" in text
    cpu = T.ratios(Result.load(REF / "startup_qwen2.5-vl-3b_release-rows.json"), 2)["0.9.0 / 0.8.5"]["estimate"]
    assert f"release ladder: {cpu:.2f}x" in text
    for name in ("startup_qwen2.5-vl-3b_128k.json", "startup_qwen2.5-vl-3b_128k_2.json"):
        share = T.hashing_share(Result.load(REPO_ROOT / "results/gpu-nvidia-h200" / name))
        assert f"{share['hash_s']:.1f} s against {share['hf_saved_s']:.1f} s" in text, name


def test_no_reporting_figures_are_the_committed_runs():
    """docs/findings.md's start-ups with the VM's free page reporting off: the third run's 128k medians, the
    paired on/off ratios of the committed page-reporting-ab run, and the same-day table's counts at 128k and 50k
    (the cost model with that run's calibration, every release row within 15%)."""
    from refimpl.lab.explore.cost_model import Calibration
    from refimpl.lab.explore.same_day import ladder_rows
    text = FINDINGS.replace("\n", " ")
    run = REF / "same-day-2026-12-04-no-reporting-3"
    ladder = Result.load(run / "startup_qwen2.5-vl-3b_release-rows_128k_2026-12-04.json")
    med = {v: median(r["total_s"] for r in x["runs"]) for v, x in ladder.variants.items()}
    assert f"took {med['0.8.5']:.1f} s (0.8.5), {med['0.9.0']:.1f} (0.9.0), {med['0.11.1']:.1f} (0.11.1) at 128k" in text
    ab = T.reporting_ab(REF / "page-reporting-ab-2026-12-04")
    ratio = {v: median(m["on"]) / median(m["off"]) for v, m in ab.items()}
    assert f"reporting on made 0.8.5 {ratio['0.8.5']:.2f}x as long and 0.11.1 {ratio['0.11.1']:.2f}x" in text
    cal = Calibration.load(run / "calibration.json")
    for tag in ("128k", "50k"):
        rows = ladder_rows(cal, run / f"startup_qwen2.5-vl-3b_release-rows_{tag}_2026-12-04.json")
        assert len(rows) == 9 and all(abs(r.seconds[0] / r.seconds[1] - 1) <= 0.15 for r in rows), tag
