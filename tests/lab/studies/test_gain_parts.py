"""The gain of a registry-call fix from its parts (gain_parts) beside the paired gain, and the
prediction over concurrency C and output length L (gain_map): their arithmetic, the interval, and
where the paired report shows them."""
import numpy as np
import pytest

from refimpl.lab.bench.schema import Result
from refimpl.lab.studies import REFERENCE, RESULTS_DIR
from refimpl.lab.studies import gain_map as GM
from refimpl.lab.studies import gain_parts as GP
from refimpl.lab.studies import whisper_sites as W
from refimpl.lab.studies.throughput import paired_table

REF = RESULTS_DIR / REFERENCE
RUN_24989 = REF / "paired_whisper-tiny.en_runner-config_scheduler-config_840s.json"


def run(calls, reg_s, steps=40, wall=2.0, **kw):
    return {"registry_calls": calls, "registry_s": reg_s, "steps": steps, "wall_s": wall, **kw}


def test_the_gain_is_removed_calls_times_their_cost_over_steps_times_step_time():
    over = [run(20, 0.2)] * 6            # 20 calls at 10 ms
    variant = [run(4, 0.04)] * 6         # 4 calls left: the fix removed 16
    pg = GP.parts_gain(over, variant, "0.11.0", "0.10.2+#24866")
    assert pg.fix == "#24989" and pg.pairs == 6 and pg.calls == 16 and pg.call_s == pytest.approx(0.01)
    assert pg.gain == pytest.approx(16 * 0.01 / 2.0)
    assert pg.interval.low == pytest.approx(pg.gain) == pytest.approx(pg.interval.high)  # no spread, no width
    assert pg.steps == {"all": 40} and pg.step_s == {"all": pytest.approx(0.05)}


def test_step_time_by_kind_weighs_each_kind_by_its_steps():
    kinds = {"decode": {"steps": 30, "s": 0.9}, "mixed": {"steps": 10, "s": 1.1}}  # 30 x 30 ms + 10 x 110 ms
    over, variant = [run(20, 0.2)] * 5, [run(4, 0.04, wall=9.0, step_kinds=kinds)] * 5  # wall is not read
    pg = GP.parts_gain(over, variant)
    assert pg.step_s == {"decode": pytest.approx(0.03), "mixed": pytest.approx(0.11)}
    assert pg.gain == pytest.approx(16 * 0.01 / 2.0) and pg.fix is None


def test_the_serving_bench_s_step_summary_gives_the_kinds():
    """A run written by the serving bench carries ``step_summary`` (telemetry.summarize_steps of its
    per-step columns); the gain from its parts reads its kinds from it, not the block's wall."""
    from refimpl.lab.bench.telemetry import summarize_steps
    cols = {"kind": ["prefill", "mixed", "decode", "decode", None], "num_running_reqs": [1, 2, 2, 1, 0],
            "wall_s": [0.5, 0.6, 0.2, 0.2, 0.0], "forward_s": None, "registry_s": [0.0] * 5}
    summary = summarize_steps(cols)
    assert GP.step_kinds({"step_summary": summary}) == {
        "prefill": (1.0, 0.5), "mixed": (1.0, 0.6), "decode": (2.0, pytest.approx(0.4))}
    over, variant = [run(20, 0.2)] * 4, [run(4, 0.04, wall=99.0, step_summary=summary)] * 4
    pg = GP.parts_gain(over, variant)
    assert pg.gain == pytest.approx(16 * 0.01 / 1.5)  # 1.5 s of steps; the block's 99 s wall is not read


def test_a_reversed_pair_takes_the_cost_from_the_row_that_made_the_calls():
    """``variant`` is the row with the calls (0.10.2+#24866 over 0.11.0): its gain from its parts is
    the same size as the forward one, negative, with c from the variant's blocks."""
    fwd = GP.parts_gain([run(16, 0.16)] * 4, [run(0, 0.0, wall=2.0)] * 4)
    rev = GP.parts_gain([run(0, 0.0, wall=2.0)] * 4, [run(16, 0.16, wall=2.0)] * 4)
    assert fwd.gain == pytest.approx(16 * 0.01 / 2.0) and rev.gain == pytest.approx(-16 * 0.01 / 2.0)
    assert rev.call_s == pytest.approx(0.01)


def test_the_interval_resamples_pairs_and_holds_the_estimate():
    rng = np.random.default_rng(1)
    over = [run(20, 0.2 * f) for f in rng.uniform(0.7, 1.3, 12)]
    variant = [run(0, 0.0, wall=w) for w in rng.uniform(1.6, 2.4, 12)]
    pg = GP.parts_gain(over, variant)
    assert pg.interval.low < pg.gain < pg.interval.high and pg.interval.resolved
    again = GP.parts_gain(over, variant)
    assert again.interval == pg.interval  # fixed seed: a rebuilt table shows the same interval


def test_no_pairs_no_gain_and_a_row_without_calls_gains_nothing():
    assert GP.parts_gain([], [run(0, 0.0)]) is None
    pg = GP.parts_gain([run(0, 0.0)] * 5, [run(0, 0.0)] * 5)
    assert pg.gain == 0.0 and pg.call_s == 0.0
    with pytest.raises(KeyError, match="steps"):
        GP.parts_gain([run(2, 0.1)], [{"registry_calls": 0, "registry_s": 0.0, "wall_s": 1.0}])


def test_on_a_committed_run_the_parts_give_the_registry_seconds_the_fix_removed():
    """0.11.0 makes no registry call: removed calls x c is the earlier row's registry seconds, so the
    gain from its parts sits at the bench's cost model (registry s removed / wall s)."""
    res = Result.load(RUN_24989)
    c = next(c for c in res.comparisons if c["metric"] == "wall_s" and c.get("pairing", "round") == "round")
    pg = GP.parts_gain_of(res, c)
    assert pg.fix == "#24989" and pg.pairs == c["pairs"]
    assert all(r["registry_calls"] == 0 for r in res.runs("0.11.0"))
    assert pg.gain == pytest.approx(c["cost_model_gain"], abs=0.002)
    assert pg.interval.low <= pg.gain <= pg.interval.high


def test_the_paired_table_shows_it_beside_the_paired_gain():
    res = Result.load(RUN_24989)
    lines = paired_table([res]).splitlines()
    header = [h.strip() for h in lines[0].strip("|").split("|")]
    assert header.index("from its parts, 95% CI") == header.index("cost model") + 1
    cell = lines[2].strip("|").split("|")[header.index("from its parts, 95% CI")].strip()
    assert cell.startswith("+") and "[" in cell
    rows = GP.points_gains([p for p in W.measured_points() if p["source"].endswith(RUN_24989.name)])
    assert rows and all(r["parts_gain"] is not None and r["parts_low"] <= r["parts_gain"] <= r["parts_high"]
                        for r in rows)


def test_the_prediction_is_the_site_model_as_a_closed_loop():
    c, T = 0.005, 0.05
    g = GM.predicted_gains(c, T, concurrency=(4, 16), output_len=(8, 64, 512), requests=4096)
    assert set(g) == set(W.FIXES) and g["#24989"].shape == (3, 2)
    for i, L in enumerate((8, 64, 512)):
        for j, C in enumerate((4, 16)):  # one call per request over max(1, L / C) steps a request
            assert g["#24989"][i, j] == pytest.approx(c / (max(1.0, L / C) * T), rel=0.02)
    assert (np.diff(g["#24989"], axis=0) < 0).all()  # longer outputs: more steps per call removed
    with pytest.raises(ValueError, match="positive"):
        GM.predicted_gains(0.0, T)


def test_the_seed_s_3_percent_is_located_between_two_lengths():
    g = GM.predicted_gains(0.005, 0.05)["#24989"]
    where = GM.seed_gain_boundary(g)
    assert where, "c / T = 10% crosses 3% on the grid"
    for C, (above, below) in where.items():
        j, i = GM.CONCURRENCY.index(C), GM.OUTPUT_LEN.index(above)
        assert g[i, j] >= W.SEED_GAIN > g[i + 1, j] and GM.OUTPUT_LEN[i + 1] == below


def test_the_figure_says_it_is_a_prediction():
    fig = GM.prediction_figure(0.005, 0.05, measured=[{"fix": "#24989", "C": 8, "L": 16, "gain": 0.015,
                                                       "low": 0.012, "high": 0.02}], source="x.json")
    assert fig._suptitle.get_text().startswith("PREDICTION (not a measurement)")
    assert len(fig.axes) == 3  # one panel per fix and the colour bar
