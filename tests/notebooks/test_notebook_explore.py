"""notebooks/00_explore.ipynb headless (papermill) in stored mode with a calibration made in the
test: no cell fails, and the values it records (values_explore.json) hold: HF passes per row as
the oracle counts them, every prediction labelled with the calibration, each control's change
answered, the Whisper panel's gains and sentences. The kernel's start and imports take tens of
seconds: marked slow."""
import json

import nbformat
import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.lab.bench.calibrate import result
from refimpl.lab.bench.specs import CalibrateSpec
from refimpl.lab.bench.trial import Trial
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore.cost_model import Calibration
from refimpl.lab.explore.explorer_panels import ExploreStudy
from refimpl.lab.report import execute
from refimpl.testing.oracles import hf_passes_by_phase
from refimpl.variants import STARTUP_VARIANTS
from tests.lab.utils import synthetic_rates

NB = REPO_ROOT / "notebooks" / "00_explore.ipynb"


@pytest.mark.slow
def test_explore_notebook_records_what_the_page_shows(tmp_path):
    runs = [{"variant": "rates", "rates": synthetic_rates(), "seconds": 20.0}]
    cal_path = result(CalibrateSpec(repeats=1), Trial({"rates": runs}), in_process=True).write(tmp_path / "cal.json")
    label = Calibration.load(cal_path).label
    params = {"OUT_DIR": str(tmp_path), "CALIBRATION": str(cal_path), "RECORD": True}  # as refimpl report runs it
    node = nbformat.read(execute(NB, tmp_path, params,
                                 timeout_s=600), as_version=4)
    assert not [o for c in node.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    v = json.loads((tmp_path / ExploreStudy.values_name).read_text())
    assert v["mode"] == "stored" and v["calibration"] == label
    vc = VllmConfig(ModelConfig("qwen2.5-vl-3b", device="cpu"), SchedulerConfig(), CacheConfig())
    for row, got in v["rows"].items():
        assert got["error"] is None and got["predicted"]["label"] == label, row
        assert {k: n for k, n in got["hf_passes_by_phase"].items() if n} == \
            {k: n for k, n in hf_passes_by_phase(vc, STARTUP_VARIANTS[row]).items() if n}, row  # the page's rows are current
    assert set(v["response_s"]) == {"variant", "model", "max_model_len", "image", "video", "min_pixels",
                                    "max_pixels", "frames", "mm_processor_cache_gb"}
    assert set(v["whisper"]["gains"]) == {"#24866", "#24989"} and "3%" in v["whisper"]["seed"]
    assert "different fix" in v["whisper"]["kit"]
    if (REPO_ROOT / "results" / Calibration.load(cal_path).hardware).is_dir():
        assert v["comparison"] and all(r["predicted"] > 0 for r in v["comparison"])
