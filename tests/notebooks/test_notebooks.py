"""Both notebooks headless (papermill, the venv's python3 kernel) in stored mode (the default) and
in QUICK mode (``MODE="quick"``, as ``refimpl report --quick`` passes it): every figure cell shows
its figure inline, no widget warning, and the values each notebook records hold against the
committed full run of the reference machine (results/cpu-amd-epyc-2c).

Stored mode renders the committed results in tens of seconds (marked slow: ``make test`` runs it,
``make test-fast`` does not). QUICK measures in fresh processes for minutes (notebook 01: several
on a quiet 2-core machine, about 15 under load), beyond the fast suite's budget: marked soak
(``make soak``). tests/lab/studies/test_analysis_modes.py checks what each mode asks of the benches in seconds."""
import json
import re
from pathlib import Path

import nbformat
import pytest

from refimpl.lab.bench.schema import Result
from refimpl.lab.report import execute
from refimpl.lab.stats import MIN_PAIRS, median
from refimpl.lab.studies import REFERENCE, RESULTS_DIR, compare
from refimpl.lab.studies.startup import quick_setting, quick_variants
from refimpl.lab.studies.startup_tables import AFTER, BEFORE
from refimpl.variants import STARTUP_VARIANTS, legacy_name

NB_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NB01, NB02 = NB_DIR / "01_startup_dummy_data_cache.ipynb", NB_DIR / "02_encoder_len_throughput.ipynb"
REF = RESULTS_DIR / REFERENCE
FIGURE_CELLS = {NB01.name: {"ladder_section", "phases_section", "budget_section"},  # each shows its figure inline
                NB02.name: {"paired_section", "sites_section", "workload_section", "encoder_batch_section",
                            "unpaired_section", "prediction_section"}}


def run(nb: Path, out: Path, **params) -> tuple[nbformat.NotebookNode, dict]:
    """Execute ``nb`` into ``out``; check its figures and outputs; return it and its values."""
    node = nbformat.read(execute(nb, out, {"DEVICE": "cpu", "OUT_DIR": str(out), **params}, timeout_s=1800),
                         as_version=4)
    assert (out / nb.name).with_suffix(".html").exists()
    shown = set()
    for c in node.cells:
        if c.cell_type != "code":
            continue
        text = "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
        assert "IProgress" not in text and not any(o.output_type == "error" for o in c.outputs)
        last = [ln for ln in c.source.splitlines() if ln.strip() and not ln.lstrip().startswith("#")][-1]
        if any("image/png" in o.get("data", {}) for o in c.outputs):
            shown |= set(re.findall(r"study\.(\w+)\(", last))
    assert FIGURE_CELLS[nb.name] <= shown, f"no inline figure: {FIGURE_CELLS[nb.name] - shown}"
    values = json.loads((out / ("values_startup.json" if nb == NB01 else "values_serving.json")).read_text())
    return node, values


def ref_row(ref: Result, row: str) -> str:
    """``row`` in the committed run: itself, or the row its name labelled there (the committed
    run predates the release rows: its ``shape-only`` is 0.9.0+#19756+#24925+uint8+shape-only)."""
    return row if row in ref.variants else legacy_name(row)


def full_ratio(ref: Result, num: str, den: str) -> dict:
    num, den = ref_row(ref, num), ref_row(ref, den)
    return compare(ref.values(num, "total_s"), ref.values(den, "total_s"))


def same_direction(a: float, b: float) -> bool:
    return (a > 1) == (b > 1)


def _startup_checks(st: dict, ref: Result) -> None:
    """What holds at every size: 0.8.5 runs the HF processor once per profiling pass (as in the
    committed run), 0.9.0 fewer times, a shape-only row never; every variant computes the same
    encoder budget, cache size and tokens per item."""
    shape_only = [v for v in st["hf_mm_passes"] if STARTUP_VARIANTS[v].mm.shape_only]
    assert st["hf_mm_passes"][BEFORE] == ref.runs(BEFORE)[0]["hf_mm_passes"]
    assert 0 < st["hf_mm_passes"][AFTER] < st["hf_mm_passes"][BEFORE]
    assert shape_only and all(st["hf_mm_passes"][v] == 0 for v in shape_only)
    for key in ("encoder_compute_budget", "encoder_cache_size", "max_tokens_per_item"):
        assert len({json.dumps(x, sort_keys=True) for x in st[key].values()}) == 1, key


@pytest.mark.slow
def test_notebook_01_stored_renders_the_committed_run(tmp_path):
    _, v = run(NB01, tmp_path)
    ref = Result.load(REF / "startup_qwen2.5-vl-3b.json")
    st = v["startup"]
    assert v["mode"] == "stored" and ref.env["git"]["commit"][:7] in st["provenance"]
    assert st["hf_mm_passes"] == {k: ref.runs(k)[0]["hf_mm_passes"] for k in ref.variants}
    _startup_checks(st, ref)
    mine, theirs = st["ratios"][f"{AFTER} / {BEFORE}"], full_ratio(ref, AFTER, BEFORE)
    assert mine["estimate"] == pytest.approx(theirs["estimate"]) and mine["estimate"] > 1
    assert mine["low"] is not None and st["ratio_of"] == "total_s"  # the committed runs: wall seconds
    assert v["budget"]["call1_ratio"]["estimate"] > 1
    rel = Result.load(REF / "startup_qwen2.5-vl-3b_release-rows.json")  # the README's release table
    assert v["release_rows"]["total_s_median"] == {k: median(rel.values(k, "total_s")) for k in rel.variants}
    rows = v["two_process"]
    assert rows["v0.9.0 (stored twoproc_startup_qwen2.5-vl-3b_v0.9.0.json)"]["p1_cache_mib_after_reset"] > 0
    assert rows["all (stored twoproc_startup_qwen2.5-vl-3b_all.json)"]["p1_cache_mib_after_reset"] == 0
    assert "timings_s" not in v  # nothing measured
    gpu = {r["variant"]: r for r in v["gpu_startup"]}  # the H200's rows beside this machine's ladder
    assert set(gpu) == {"0.8.5", "0.9.0", "0.11.1", "refimpl"} and all(r["hardware"] == "gpu-nvidia-h200" for r in gpu.values())
    assert gpu["0.9.0"]["cpu_total_s"] == rel.values("0.9.0", "total_s")
    pngs = {p.name for p in tmp_path.glob("*.png")}
    assert {"startup_ladder.png", "startup_phases.png", "budget_calls.png"} <= pngs


@pytest.mark.soak
def test_notebook_01_quick_tells_the_full_run_s_story(tmp_path):
    """QUICK: fresh processes, the int64 video at its smallest, and the start-up finding's
    direction (0.9.0 slower than 0.8.5) as in the committed full run; every ratio it shows agrees
    in direction with the full run's."""
    _, v = run(NB01, tmp_path, MODE="quick")
    ref, ref_budget = (Result.load(REF / f"{b}_qwen2.5-vl-3b.json") for b in ("startup", "budget"))
    st = v["startup"]
    assert v["mode"] == "quick" and not st["in_process"] and "fresh processes" in st["provenance"]
    assert st["size"].startswith(quick_setting().describe())  # the committed setting where the finding held
    assert st["regime"]["committed"]["held"]
    assert set(st["runs"]) == set(quick_variants()) and set(st["runs"].values()) == {2}
    _startup_checks(st, ref)
    assert st["hashing"]["hash_s"] > 0 and st["hashing"]["hf_saved_s"] > 0  # the int64 video's hashing
    assert st["ratio_of"] == "cpu_s"  # CPU seconds: another process on the machine hardly moves them
    finding = st["ratios"][f"{AFTER} / {BEFORE}"]
    assert finding["estimate"] is not None and finding["low"] is not None
    for key, r in st["ratios"].items():
        full = full_ratio(ref, *key.split(" / "))
        assert r["estimate"] is None or same_direction(r["estimate"], full["estimate"]), (key, r, full)
    call1 = v["budget"]["call1_ratio"]
    full1 = compare(*([x["calls_s"][0] for x in ref_budget.runs(k)] for k in (AFTER, BEFORE)))
    assert call1["estimate"] is None or same_direction(call1["estimate"], full1["estimate"])
    assert v["photos"]["identical"] and v["photos"]["pass2"]["hf_mm_passes"] == 0
    assert v["photos"]["pass2"]["hits"] == v["photos"]["pass1"]["misses"] > 0
    assert v["timings_s"] and (tmp_path / "startup_qwen2.5-vl-3b.json").exists()


def _registry_calls(gains: dict) -> None:
    """Where the registry is called: 0.10.2 and 0.10.2+#24866 (its scheduler) call it, 0.11.0 never."""
    for g in gains.values():
        calls = g["registry_calls"]
        assert calls.get("0.11.0", 0) == 0
        assert all(n > 0 for k, n in calls.items() if k in ("0.10.2", "0.10.2+#24866"))
        assert g["tokens_identical"] is True


@pytest.mark.slow
def test_notebook_02_stored_renders_the_committed_runs(tmp_path):
    node, v = run(NB02, tmp_path)
    assert v["mode"] == "stored"
    shown = "".join(o.get("data", {}).get("text/markdown", "") for c in node.cells if c.cell_type == "code"
                    for o in c.outputs)
    assert "| +1.50% | [+1.25%, +2.11%] |" in shown and "_840s.json" in shown  # the README's #24989 run
    for name, key in (("registry_runner-config", "0.10.2+#24866 over 0.10.2"),  # v1 files: old names on disk
                      ("runner-config_scheduler-config", "0.11.0 over 0.10.2+#24866")):
        c = next(c for c in Result.load(REF / f"paired_whisper-tiny.en_{name}.json").comparisons
                 if c["metric"] == "cpu_s" and c.get("pairing", "round") == "round")
        assert v["paired"][key]["gain"] == pytest.approx(c["gain"]) and c["pairs"] >= MIN_PAIRS
    _registry_calls(v["paired"])
    wl = Result.load(REF / "workload_whisper-tiny.en_both_all.json")
    assert v["workload"]["requests_per_s"]["ratio"] == pytest.approx(wl.comparisons[0]["ratio"])
    calls = v["unpaired"]["registry_calls"]
    assert calls["0.11.0"] == 0 < calls["0.10.2"]
    assert all(g["estimate"] is None for g in v["unpaired"]["gains"].values())  # 2 runs a side: none shown
    assert 0 <= v["wer"]["corpus_wer"] < 0.5 and v["wer"]["clips"] > 0
    gpu = {r["variant"]: r for r in v["gpu_registry"] if r["file"] == "paired_whisper-large-v3.json"}
    assert gpu["0.10.2"]["share"] > gpu["0.10.2+#24866"]["share"] > gpu["0.11.0"]["share"] == 0
    assert "gpu-nvidia-h200" in shown and "registry share of wall" in shown
    assert "from its parts, 95% CI" in shown and "Prediction (not a measurement)" in shown
    assert v["prediction"]["call_s"] > 0 and v["prediction"]["step_s"] > 0
    assert all(r["parts_low"] <= r["parts_gain"] <= r["parts_high"] for r in v["parts_gain"])


@pytest.mark.soak
def test_notebook_02_quick_shows_no_unsupported_gain(tmp_path):
    """QUICK's tiny blocks: every part runs, the variants decode identical tokens, the registry is
    called where the release called it, and no gain from fewer than MIN_PAIRS pairs is shown."""
    _, v = run(NB02, tmp_path, MODE="quick")
    assert v["mode"] == "quick"
    _registry_calls(v["paired"])
    assert all(g["gain"] is None for part in ("paired", "encoder_batch") for g in v[part].values())
    assert v["workload"]["requests_per_s"]["ratio"] is None
    calls = v["unpaired"]["registry_calls"]
    assert calls["0.11.0"] == 0 < calls["0.10.2"]
    assert all(g["estimate"] is None for g in v["unpaired"]["gains"].values())
    assert v["wer"]["clips"] > 0 and set(v["timings_s"]) >= {"wer_whisper-tiny.en.json"}
