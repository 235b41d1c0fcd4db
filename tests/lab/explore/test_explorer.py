"""The explorer as a person uses it: set a control on the panel, read the redrawn output. Every
answer comes from the configs (no HF-processor pass, nothing of the dummy data's size allocated);
predicted numbers carry the calibration's label, the committed measurement beside them."""
import json
import tracemalloc

import numpy as np
import pytest
import torch
from PIL import Image

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.config.model import get_config_dict, get_preprocessor_dict
from refimpl.engine.startup_plan import REGISTRY as PLAN_REGISTRY
from refimpl.lab.explore import cost_model as cm
from refimpl.lab.explore.explorer import Settings, explore
from refimpl.lab.explore.explorer_panels import ExplorerPanel
from refimpl.multimodal import MULTIMODAL_REGISTRY
from refimpl.testing.oracles import hf_passes_by_phase
from tests.lab.utils import synthetic_rates

MiB, GiB = 1 << 20, 1 << 30


@pytest.fixture(scope="module")
def cal():
    return cm.Calibration(synthetic_rates(), "cpu-amd-epyc-2c", "2026-01-01")


@pytest.fixture(scope="module")
def panel(cal):
    return ExplorerPanel(Settings(variant="0.9.0"), cal)


@pytest.fixture
def no_big_arrays(monkeypatch):
    """Fails a test that builds a dummy-sized array through torch or PIL (numpy: tracemalloc)."""
    def guard(fn, size_of):
        def wrapped(*a, **kw):
            assert size_of(a) <= MiB, f"{fn.__name__} of {a}"
            return fn(*a, **kw)
        return wrapped
    numel = lambda a: int(np.prod(a[0] if isinstance(a[0], (tuple, list, torch.Size)) else a))  # noqa: E731
    for name in ("zeros", "ones", "full", "empty"):
        monkeypatch.setattr(torch, name, guard(getattr(torch, name), numel))
    monkeypatch.setattr(Image, "new", guard(Image.new, lambda a: a[1][0] * a[1][1]))


def test_explore_makes_no_hf_pass_and_allocates_nothing_big(cal, no_big_arrays):
    explore(Settings(max_model_len=16384), cal)  # configs read and processors' info built once
    before = (PLAN_REGISTRY.stats.hf_processor_calls, MULTIMODAL_REGISTRY.stats.hf_processor_calls,
              PLAN_REGISTRY.stats.dummy_s, PLAN_REGISTRY.stats.hash_s)
    tracemalloc.start()
    outs = [explore(Settings(variant=v, max_model_len=n), cal) for v in ("0.9.0", "0.11.1") for n in (None, 50000)]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert all(o.error is None for o in outs)
    assert (PLAN_REGISTRY.stats.hf_processor_calls, MULTIMODAL_REGISTRY.stats.hf_processor_calls,
            PLAN_REGISTRY.stats.dummy_s, PLAN_REGISTRY.stats.hash_s) == before
    assert peak < 4 * MiB, peak  # the 128k dummy video alone is 3.4 GiB as int64


def test_outputs_at_128k_under_0_9_0(cal):
    o = explore(Settings(variant="0.9.0"), cal)
    vc = VllmConfig(ModelConfig("qwen2.5-vl-3b", device="cpu"), SchedulerConfig(), CacheConfig())
    video = next(i for s in o.plan.steps for i in s.items if i.modality == "video")
    assert (video.dtype, video.nbytes) == ("int64", 12 * 3584 * 3584 * 3 * 8)
    assert set(o.max_tokens_per_item) == {"image", "video"} and o.encoder_budget[0] > 0
    assert {k: n for k, n in o.hf_passes_by_phase().items() if n} == \
        {k: n for k, n in hf_passes_by_phase(vc, "0.9.0").items() if n}
    before, frees = o.plan.reset_frees()["P1 engine core (mp)"]
    assert before == o.plan.cache_bytes_before_reset > 0 and frees == 0  # 0.9.0 resets P0 only
    p = o.summary()["predicted"]
    assert p["label"] == cal.label and p["total_s"] > 0 and p["peak_rss_bytes"] > GiB
    assert o.measured is not None and o.measured["source"].startswith("results/cpu-amd-epyc-2c/")


def test_changing_controls_changes_the_output(panel, cal):
    base = panel.set(variant="0.9.0", max_model_len=0).summary()
    assert cal.label in panel.html.value and "measured:" in panel.html.value
    shape_only = panel.set(variant="shape-only").summary()
    assert sum(shape_only["hf_passes_by_phase"].values()) == 0 < sum(base["hf_passes_by_phase"].values())
    assert shape_only["predicted"]["peak_rss_bytes"] < base["predicted"]["peak_rss_bytes"]
    smaller = panel.set(variant="0.9.0", max_model_len=16384).summary()
    assert smaller["encoder_budget"][0] <= base["encoder_budget"][0]
    assert "no committed run of these settings" in panel.html.value
    no_video = panel.set(max_model_len=0, video=0).summary()
    assert "video" not in no_video["max_tokens_per_item"] and no_video["encoder_budget"][0] < base["encoder_budget"][0]
    small_pixels = panel.set(video=1, max_pixels=256 * 28 * 28).summary()
    assert small_pixels["max_tokens_per_item"]["image"] < base["max_tokens_per_item"]["image"]
    frames = panel.set(max_pixels=0, frames=2).summary()
    assert frames["max_tokens_per_item"]["video"] < base["max_tokens_per_item"]["video"]
    panel.set(frames=0)
    assert [c for c, _ in panel.timings][-2:] == ["frames", "frames"]


def test_whisper_and_the_cache_size(panel):
    w = panel.set(model="whisper-tiny", variant="0.9.0").summary()
    assert set(w["max_tokens_per_item"]) == {"audio"} and w["error"] is None
    assert "audio" in panel.html.value and "float64" in panel.html.value
    q = panel.set(model="qwen2.5-vl-3b", mm_processor_cache_gb=1.0).summary()
    assert q["failure"] and "value too large" in q["failure"] and "start-up fails" in panel.html.value
    panel.set(mm_processor_cache_gb=4.0)


def test_bad_settings_are_refused_on_the_page(panel):
    bad = panel.set(min_pixels=10).summary()
    assert bad["error"].startswith("ConfigError") and "min_pixels" in bad["error"]
    assert "refused" in panel.html.value
    assert panel.set(min_pixels=0).summary()["error"] is None


def test_local_hf_directory(panel, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(get_config_dict("qwen2.5-vl-3b")))
    pre = {**get_preprocessor_dict("qwen2.5-vl-3b"), "max_pixels": 512 * 28 * 28}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(pre))
    shipped = panel.set(model="qwen2.5-vl-3b").summary()
    local = panel.set(model="local HF directory", model_path=str(tmp_path)).summary()
    assert local["model"] == "qwen2.5-vl-3b" and local["measured"] is None
    assert local["max_tokens_per_item"]["image"] < shipped["max_tokens_per_item"]["image"]
    missing = panel.set(model_path=str(tmp_path / "nowhere")).summary()
    assert "model_path" in missing["error"] and "config.json" in missing["error"]
    panel.set(model="qwen2.5-vl-3b", model_path="")


def test_without_a_calibration_nothing_is_predicted():
    o = explore(Settings(variant="0.11.1"), None, no_calibration="no calibration for this machine")
    assert o.prediction is None and o.summary()["predicted"] is None and o.plan is not None


def test_the_chart_stacks_every_row_by_part_with_ratios_and_measured_points(cal):
    """Every release row and ours for the settings, parts summing to each total, the reference
    row at 1.00x; at the committed settings the measured medians stand beside the bars."""
    from refimpl.lab.explore import explorer_chart as ec
    rows = ec.ladder(Settings(), cal)
    assert [r.row for r in rows] == list(ec.CHART_ROWS)
    assert all(abs(sum(r.parts.values()) - r.total_s) < 1e-9 for r in rows)
    assert ec.ratio(rows, "0.8.5")["0.8.5"] == 1.0 and ec.ratio(rows, "0.9.0")["0.9.0"] == 1.0
    assert all(r.measured_s for r in rows)  # the committed 128k ladder
    assert not any(r.measured_s for r in ec.ladder(Settings(max_model_len=33333), cal))
    fig = ec.ladder_figure(rows, cal, "0.8.5")
    assert len(fig.axes[0].patches) == len(rows) * len(ec.CHART_PARTS)
    assert "2026-01-01" in ec.ladder_table(rows, cal) and "predicted / 0.8.5" in ec.ladder_table(rows, cal)


def test_the_chart_shows_seconds_and_peak_memory_of_each_row_at_once(cal):
    """Issue 44: no dropdown between the two: the right panel holds one bar per row, its
    predicted peak RSS (the same number explore() predicts), the committed runs' measured peaks
    beside them, and the table carries both quantities with their ratios."""
    from refimpl.lab.explore import explorer_chart as ec
    rows = ec.ladder(Settings(), cal)
    fig = ec.ladder_figure(rows, cal, "0.8.5")
    seconds, memory = fig.axes
    assert "seconds" in seconds.get_xlabel() and "RSS" in memory.get_xlabel()
    top_down = sorted(memory.patches, key=lambda p: -p.get_y())  # ladder order, first row on top
    assert [p.get_width() for p in top_down] == pytest.approx(
        [explore(Settings(variant=r.row), cal).prediction.peak_rss_bytes / GiB for r in rows])
    assert len({round(p.get_width(), 3) for p in top_down}) > 1  # the rows differ in memory
    (meas_s,), (meas_rss,) = seconds.collections, memory.collections  # the measured diamonds
    assert len(meas_s.get_offsets()) == len(meas_rss.get_offsets()) == len(rows)
    assert sorted(meas_rss.get_offsets()[:, 0]) == pytest.approx(sorted(r.measured_rss_bytes / GiB for r in rows))
    texts = [t.get_text() for t in memory.texts]
    assert len(texts) == len(rows) and all("GiB" in t for t in texts) and any("1.00x" in t for t in texts)
    table = ec.ladder_table(rows, cal)
    assert "predicted peak RSS GiB" in table and "measured peak RSS GiB" in table
    assert f"{rows[0].peak_rss_bytes / GiB:.2f}" in table


def test_the_panel_draws_the_chart_and_checks_a_path_when_the_field_is_left(panel):
    assert panel.chart.value[:4] == b"\x89PNG" and 'id="explorer-ladder"' in panel.ladder_html.value
    assert panel.controls["model_path"].continuous_update is False
    panel.set(reference="0.9.0")
    assert "predicted / 0.9.0" in panel.ladder_html.value


def test_the_comparison_tables_are_folded_under_the_summary(monkeypatch, tmp_path):
    """Issue 44: the page opens on the within-goal summary; the long tables are in <details>."""
    from refimpl.lab.explore import explorer_panels as EP
    shown: list = []
    monkeypatch.setattr(EP, "display", lambda x: shown.append(x.data))
    study = EP.ExploreStudy("stored", out_dir=tmp_path)
    if study.calibration is None:  # this machine has no committed calibration
        study = EP.ExploreStudy("stored", out_dir=tmp_path, calibration=EP.cost_check.REPO_ROOT
                                / "results/cpu-amd-epyc-2c/calibration.json")
    table = study.comparison()
    (page,) = shown
    assert page.startswith("- ") and page.count("<details>") == 2 == page.count("</details>")
    assert table in page and page.index(table) > page.index("<details>")
