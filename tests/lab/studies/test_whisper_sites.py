"""The per-site model of Whisper's registry calls (#24866, #24989): its formula, the measured
points it reads from the committed paired Results, the sentences, and the panel's controls."""
import pytest

from refimpl.lab.explore import cost_model as cm
from refimpl.lab.explore.explorer_panels import WhisperPanel
from refimpl.lab.studies import whisper_sites as ws
from tests.lab.utils import synthetic_rates


@pytest.fixture(scope="module")
def points():
    return ws.measured_points()


def test_gain_is_calls_times_cost_over_serving_time():
    m = ws.SiteModel(registry_call_s=0.01, step_s=0.1, requests=8, attempts_per_request=2.0, max_tokens=16,
                     max_num_seqs=8, startup_calls=3)
    assert m.steps == 23  # 8 + 16 - 1: one audio admitted per step
    assert m.calls("#24866") == 23 and m.calls("#24989") == 8 * 2 + 3
    assert m.gain("#24989") == pytest.approx(19 * 0.01 / (23 * 0.1))
    assert m.gain("#24866") == pytest.approx(23 * 0.01 / (23 * 0.1 + 19 * 0.01))
    at = m.step_s_for("#24989", 0.03)
    assert ws.SiteModel(0.01, at, 8, 2.0, 16, 8, 3).gain("#24989") == pytest.approx(0.03)
    curve = ws.gain_curve(m, [0.01, 0.1, 1.0])["#24989"]
    assert curve[0] > curve[1] > curve[2]  # the gain falls as the step grows


def test_measured_points_come_from_the_committed_paired_results(points):
    quiet = [p for p in points if p["hardware"] == "cpu-amd-epyc-2c"]
    assert {p["fix"] for p in quiet} == {"#24866", "#24989"}
    for p in quiet:
        assert p["source"].startswith("results/cpu-amd-epyc-2c/paired_") and p["low"] <= p["gain"] <= p["high"]
        assert p["registry_call_s"] > 0 and p["step_s"] > 0 and p["steps"] >= p["requests"]
        # the model at the point's own measured inputs lands inside the measured 95% interval
        assert p["low"] <= ws.model_of(p).gain(p["fix"]) <= p["high"], p


def test_gpu_points_are_squares_of_their_own_hardware(points):
    """The committed H200 run (results/gpu-nvidia-h200/) gives a point per fix, marked as a GPU's."""
    gpu = [p for p in points if p["gpu"]]
    assert {p["fix"] for p in gpu} == {"#24866", "#24989"}
    assert all(p["hardware"].startswith("gpu-") and p["model"] == "whisper-large-v3" for p in gpu)


def test_the_sentences_name_the_quantities_and_the_other_fix(points):
    ref = ws.reference(points)
    seed = ws.seed_sentence(points)
    at = ws.model_of(ref).step_s_for("#24989", ws.SEED_GAIN)
    assert "#24989" in seed and "3%" in seed and f"{1e3 * at:.0f} ms" in seed
    assert f"{1e3 * ref['registry_call_s']:.1f} ms" in seed
    assert "measured here" not in seed and ref["source"] in seed  # committed figures, labelled so
    kit = ws.kit_sentence(points)
    gain = ws.reference(points, "#24866")["gain"]
    assert f"{100 * gain:+.2f}%" in kit and "different fix" in kit and "#24866" in kit
    assert ws.seed_sentence([]).startswith("No paired run")


def test_panel_controls_change_the_gains(points):
    cal = cm.Calibration(synthetic_rates(), "cpu-synthetic-2c", "2026-01-01")
    panel = WhisperPanel(cal, points)
    ref = ws.reference(points)
    assert panel.controls["call_ms"].value == round(1e3 * ref["registry_call_s"], 2)  # measured while serving
    panel.controls["model"].value = "whisper-large-v3"  # served on a GPU: that run's cost per call
    gpu = [p for p in points if p["model"] == "whisper-large-v3"]
    assert gpu and panel.controls["call_ms"].value == round(1e3 * min(
        gpu, key=lambda p: p["high"] - p["low"])["registry_call_s"], 2)
    panel.controls["model"].value = "whisper-tiny"  # no paired run: the calibration's
    assert panel.controls["call_ms"].value == 9.0
    panel.controls["model"].value = ref["model"]
    measured_here = dict(panel.gains)
    panel.controls["step"].value = "typed in"
    panel.controls["step_ms"].value = 10.0
    assert panel.gains["#24989"] > measured_here["#24989"] and panel.gains["#24866"] > measured_here["#24866"]
    assert "whisper-gain-24989" in panel.html.value and "different fix" in panel.note.value
    more = dict(panel.gains)
    panel.controls["attempts"].value = 4.0
    assert panel.gains["#24989"] > more["#24989"]
    panel.controls["startup"].value = True
    assert panel.model().startup_calls > 0
    assert panel.image.value[:4] == b"\x89PNG"
