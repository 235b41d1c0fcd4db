"""Issue 44, a lighter explorer: the page computes only what it shows. Counted, never timed: each
prediction the cost model makes (the pricing of one plan, in refimpl.lab.explore.prediction and in
the cost check) is counted while the page is built and used as a person would."""
import pytest

from refimpl.lab.bench.schema import Result
from refimpl.lab.explore import cost_check, prediction
from refimpl.lab.explore import explorer_panels as EP
from refimpl.lab.explore.cost_model import Calibration
from refimpl.lab.explore.explorer_chart import CHART_ROWS
from refimpl.lab.explore.explorer_comparison import ComparisonPanel
from refimpl.lab.studies import REFERENCE, RESULTS_DIR

CALIBRATION = RESULTS_DIR / REFERENCE / "calibration.json"


@pytest.fixture
def predictions(monkeypatch):
    """The predictions made, one entry (the caller's module) each."""
    made: list[str] = []
    for mod in (prediction, cost_check):
        def counted(plan, cal, orig=mod.predict, name=mod.__name__):
            made.append(name)
            return orig(plan, cal)
        monkeypatch.setattr(mod, "predict", counted)
    return made


def _predicted_in(paths) -> int:
    """Predictions the cost check makes for these Results: one per variant that has runs."""
    return sum(1 for p in paths for v in Result.load(p).variants.values() if v["runs"])


def test_the_page_for_one_setting_predicts_only_the_rows_its_chart_shows(predictions):
    """The page's cells as voila runs them (RECORD off): the default setting's chart rows are the
    only predictions; the comparison section is closed and has predicted nothing."""
    study = EP.ExploreStudy("stored", calibration=CALIBRATION)
    panel = study.explorer()
    study.whisper()
    section = study.comparison_panel()
    assert [r.row for r in panel.ladder] == list(CHART_ROWS) and panel.outputs.settings.variant in CHART_ROWS
    assert len(predictions) == panel.computed == len(CHART_ROWS)  # the shown row's answer is its chart row's
    assert section.selected_index is None and study.comparison_section.computed == []
    assert "response_s" not in study.values and "rows" not in study.values  # report-only work not done


def test_a_change_predicts_only_what_it_has_not_answered_yet(predictions):
    panel = EP.ExplorerPanel(calibration=Calibration.load(CALIBRATION))
    n = len(predictions)
    for change in ({"variant": "0.8.5"}, {"reference": "0.9.0"}, {"variant": "shape-only"}, {"variant": "0.9.0"}):
        panel.set(**change)
    assert len(predictions) == n  # rows the chart already holds, and the chart's reference row
    panel.set(max_model_len=50000)
    assert len(predictions) == n + len(CHART_ROWS)  # a new setting: its chart rows, nothing more
    panel.set(max_model_len=0)
    assert len(predictions) == n + len(CHART_ROWS)  # a setting answered before is kept
    panel.set(variant="0.9.0+#19484")  # a row outside the chart: that one row
    assert len(predictions) == n + len(CHART_ROWS) + 1
    assert "0.9.0+#19484" in panel.html.value and len(panel.ladder) == len(CHART_ROWS)


def test_the_comparison_predicts_the_page_it_shows(predictions):
    """Closed: nothing predicted; opened: the first page's Results; next: that page's; back: kept;
    the summary: every Result, each predicted once."""
    section = ComparisonPanel(Calibration.load(CALIBRATION), page_size=2)
    assert len(section.sources) > 4 and section.pages == -(-len(section.sources) // 2)
    assert not predictions and section.computed == [] and section.text == ""
    section.widget.selected_index = 0  # the reader opens it
    assert section.computed == section.sources[:2] and len(predictions) == _predicted_in(section.sources[:2])
    assert str(section.sources[0].relative_to(RESULTS_DIR.parent)) in section.text and section.prev.disabled
    section.next.click()
    assert section.computed == section.sources[:4] and len(predictions) == _predicted_in(section.sources[:4])
    assert str(section.sources[2].relative_to(RESULTS_DIR.parent)) in section.text
    assert str(section.sources[0].relative_to(RESULTS_DIR.parent)) not in section.text
    section.prev.click()
    assert len(predictions) == _predicted_in(section.sources[:4])  # shown before: kept
    lines = section.summarize()
    assert sorted(section.computed) == sorted(section.sources) and len(predictions) == _predicted_in(section.sources)
    assert lines == cost_check.within_goal(*_all_rows(section))
    section.show(section.pages + 5)  # clamped to the last page
    assert section.page == section.pages - 1 and section.next.disabled


def _all_rows(section: ComparisonPanel):
    rows = [r for page in range(section.pages) for r in section.rows(page)]
    return rows + cost_check.ratio_rows(rows), section.calibration
