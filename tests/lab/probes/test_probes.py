"""refimpl/lab/probes: each probe's spec refuses bad input in one line naming the field, before anything
runs, and on a tiny setting returns a Result in the one schema with the variants and runs it promises
(behaviour, never timings). The probes that build engines or start processes are marked slow."""
import dataclasses
from pathlib import Path

import pytest

from refimpl.errors import ConfigError, InsufficientMemoryError, UnknownModelError
from refimpl.lab import cli
from refimpl.lab.bench.schema import BENCHES, Result, validate
from refimpl.lab.env import page_reporting
from refimpl.lab.probes import PROBES, probe_function
from refimpl.lab.probes.specs import (
    CacheHitSpec,
    CrossAttentionFragmentationSpec,
    CrossAttentionReadSpec,
    EncoderBatchSpec,
    EngineVsGenerateSpec,
    ExplorerReadySpec,
    FirstTouchSpec,
    ServingMemorySpec,
    SpawnCostSpec,
    StepOpsSpec,
)

ROOT = Path(__file__).resolve().parents[3]


def _checked(res: Result, name: str, variants: list[str], runs) -> Result:
    """``res`` valid, of bench ``name``, these variants, ``runs`` runs each (a number, or one per variant)."""
    validate(res.to_dict())
    assert res.bench == name and list(res.variants) == variants
    counts = [len(v["runs"]) for v in res.variants.values()]
    assert counts == (runs if isinstance(runs, list) else [runs] * len(variants)), counts
    assert res.env["device"] == "cpu"
    return res


def test_every_probe_is_registered_with_its_spec_and_the_schema():
    for name, (cls, _) in PROBES.items():
        assert cls.name == name and name in BENCHES and cls.__doc__
        assert callable(probe_function(name))
        cls().check()  # the defaults pass


@pytest.mark.parametrize("cls", [c for c, _ in PROBES.values()], ids=list(PROBES))
def test_each_bound_refused_below_and_accepted_at_it(cls):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, low in cls.at_least.items():
        assert name in fields, name
        at = type(fields[name].default)(low)
        cls(**{name: at}).check()  # the bound itself is allowed
        with pytest.raises(ConfigError) as e:
            cls(**{name: at - 1}).check()
        assert e.value.field == name and f">= {low:g}" in str(e.value)


@pytest.mark.parametrize("spec, field", [
    (CacheHitSpec(rows="65536"), "rows"),                              # a type
    (FirstTouchSpec(pause=True), "pause"),
    (CrossAttentionFragmentationSpec(reads=("dense-once", "paged")), "reads"),   # a choice
    (StepOpsSpec(cross_attention_read="dense"), "cross_attention_read"),
    (ServingMemorySpec(scale="medium"), "scale"),
    (EngineVsGenerateSpec(order="EX"), "order"),
    (EngineVsGenerateSpec(order=""), "order"),
    (EngineVsGenerateSpec(trees=("/nonexistent-tree",)), "trees"),
    (EngineVsGenerateSpec(trees=(str(ROOT), str(ROOT) + "/.")), "trees"),
    (StepOpsSpec(max_tokens=10_000), "max_tokens"),                     # beyond what Whisper decodes
    (SpawnCostSpec(model="no-such-model"), "model"),
    (ExplorerReadySpec(trees=(str(ROOT / "refimpl"),)), "trees"),          # no notebooks/00_explore.ipynb
    (ExplorerReadySpec(trees=(str(ROOT), str(ROOT) + "/.")), "trees"),
    (ExplorerReadySpec(loads=1.5), "loads"),
    (EncoderBatchSpec(cases=()), "cases"),
    (EncoderBatchSpec(cases=("1792x0",)), "cases"),                    # no pair
    (EncoderBatchSpec(cases=("100x2",)), "cases"),                     # not a multiple of 28
    (EncoderBatchSpec(cases=("1792",)), "cases"),
    (EncoderBatchSpec(cases=("0x2",)), "cases"),
    (EncoderBatchSpec(cases=("28x\u00b2",)), "cases"),                  # a digit int() refuses
    (EncoderBatchSpec(cases=("\uff11\uff17\uff19\uff12x4",)), "cases"),  # full-width digits
    (EncoderBatchSpec(cases=("112x01",)), "cases"),                    # a leading zero
    (EncoderBatchSpec(cases=("112x1", "112x2", "112x1")), "cases"),    # a case twice
])
def test_bad_values_are_refused_naming_the_field(spec, field):
    with pytest.raises(ConfigError) as e:
        spec.check()
    assert e.value.field == field


def test_encoder_batch_refuses_bad_cases_in_one_line_without_a_traceback(capsys):
    for bad in ("28x\u00b2", "\u0968\u096ex1", "112x1 112x1"):
        assert cli.main(["probe", "encoder-batch", "--cases", *bad.split()]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "error: cases:" in err, err


def test_a_whisper_probe_refuses_another_model():
    with pytest.raises(UnknownModelError) as e:
        ServingMemorySpec(model="qwen2.5-vl-3b").check()
    assert e.value.field == "model"


@pytest.mark.parametrize("model", ["whisper-tiny", "no-such-model"])
def test_encoder_batch_refuses_a_model_that_is_not_qwen2_5_vl_naming_those_it_takes(model):
    with pytest.raises(UnknownModelError) as e:
        EncoderBatchSpec(model=model).check()
    assert e.value.field == "model" and "qwen2.5-vl-3b" in str(e.value) and "whisper" not in str(e.value.limit)


def test_encoder_batch_times_each_case_per_pair():
    spec = EncoderBatchSpec(cases=("112x1", "112x3", "224x1"), draws=2)
    res = _checked(probe_function("encoder-batch")(spec), "encoder-batch", ["112x1", "112x3", "224x1"], 2)
    assert [res.variants[c]["summary"]["pairs"] for c in spec.cases] == [1, 3, 1]
    assert [res.variants[c]["summary"]["tokens_per_pair"] for c in spec.cases] == [16, 16, 64]
    for c, (_, pairs) in zip(spec.cases, spec.pairs()):
        assert all(r["s"] > 0 and r["s_per_pair"] == pytest.approx(r["s"] / pairs) for r in res.runs(c))
    assert res.params["torch_num_threads"] == 1 and res.params["cases"] == list(spec.cases)


def test_encoder_batch_refuses_a_batch_memory_cannot_hold_before_building_it():
    with pytest.raises(InsufficientMemoryError) as e:
        probe_function("encoder-batch")(EncoderBatchSpec(cases=("3584x4096",)))
    assert e.value.field == "cases"


def test_cli_refuses_in_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "r.json"
    for argv, field in ((["cache-hit", "--rows", "0"], "rows"), (["cache-hit", "--rows", "many"], "rows"),
                        (["engine-vs-generate", "--order", "EZ"], "order"), (["no-such-probe"], "probe")):
        assert cli.main(["probe", *argv, "--output-json", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("refimpl probe") and f"error: {field}:" in err, err
    assert not out.exists()


def test_first_touch_three_rounds_and_the_reporting_state():
    res = probe_function("first-touch")(FirstTouchSpec(arrays=2, array_mib=1, pause=0.0))
    _checked(res, "first-touch", ["first touch", "right after a free", "after idle"], 2)
    assert all(r["s_per_gib"] > 0 for v in res.variants.values() for r in v["runs"])
    assert res.params["page_reporting"] == page_reporting()
    assert (res.params["reported_gib"] is None) == (page_reporting() is None)


def test_first_touch_refuses_a_round_memory_cannot_hold_before_touching_any():
    with pytest.raises(InsufficientMemoryError) as e:
        probe_function("first-touch")(FirstTouchSpec(arrays=1 << 20, pause=0.0))
    assert e.value.field == "arrays"


def test_cache_hit_copies_nothing_on_a_hit_and_counts_every_hit(tmp_path):
    out = tmp_path / "hit.json"
    assert cli.main(["probe", "cache-hit", "--rows", "64", "--repeats", "2", "--output-json", str(out)]) == 0
    res = _checked(Result.load(out), "cache-hit", ["hit", "hit-and-clone"], 2)
    assert res.params["hits"] == 2 * (2 + 1) and res.params["invalidated"] == 0
    assert res.params["item_bytes"] == 64 * 1176 * 4 + 3 * 8
    assert res.variants["hit"]["summary"]["s"]["n"] == 2


def test_cross_attention_read_both_reads_agree_on_a_partial_last_block():
    spec = CrossAttentionReadSpec(batch=2, iters=2, encoder_len=40, heads=2, head_dim=8, block_size=16)
    res = probe_function("cross-attention-read")(spec)
    _checked(res, "cross-attention-read", ["paged-runs", "dense-once", "dense-copy"], 2)
    assert res.params["torch_num_threads"] == 1


@pytest.mark.slow
def test_cross_attention_fragmentation_counts_the_runs_of_every_request_handed():
    spec = CrossAttentionFragmentationSpec(num_requests=3, runs=2, max_tokens=4, max_num_seqs=2)
    res = _checked(probe_function("cross-attention-fragmentation")(spec), "cross-attention-fragmentation",
                   ["paged-runs", "dense-once"], 2)
    for v in res.variants.values():
        assert all(r["requests_handed"] == 3 and r["key_runs_per_request"] >= 1 for r in v["runs"])


@pytest.mark.slow
def test_engine_vs_generate_in_this_process_serves_the_same_requests():
    spec = EngineVsGenerateSpec(num_requests=2, max_num_seqs=2, max_tokens=4, warmup_requests=0, order="EHE")
    res = _checked(probe_function("engine-vs-generate")(spec), "engine-vs-generate", ["engine", "hf-generate"], [2, 1])
    assert all(r["num_output_tokens"] > 0 and r["cpu_s"] > 0 for v in res.variants.values() for r in v["runs"])
    assert "step_split" in res.runs("engine")[0] and res.variants["engine"]["summary"]["engine_over_generate_rps"] > 0


@pytest.mark.slow
def test_engine_vs_generate_against_a_tree_runs_fresh_processes_of_it():
    spec = EngineVsGenerateSpec(num_requests=2, max_num_seqs=2, max_tokens=4, warmup_requests=0,
                                trees=(str(ROOT),), rounds=2)
    res = _checked(probe_function("engine-vs-generate")(spec), "engine-vs-generate",
                   [f"engine {ROOT}", f"hf-generate {ROOT}"], 2)
    assert res.env["in_process"] is False and res.comparisons == []
    assert [r["round"] for r in res.runs(f"engine {ROOT}")] == [0, 1]
    assert res.variants[f"engine {ROOT}"]["summary"]["engine_over_generate_rps"]["n"] == 2


@pytest.mark.slow
def test_step_ops_counts_every_step_kind_against_generate():
    res = _checked(probe_function("step-ops")(StepOpsSpec(num_requests=2, max_tokens=3)), "step-ops",
                   ["engine", "hf-generate"], [4, 1])
    assert [r["kind"] for r in res.runs("engine")] == ["prefill", "mixed", "decode", "decode_full"]
    assert res.runs("engine")[3]["num_steps"] > 0 and res.variants["engine"]["summary"]["ratio"] > 0
    assert res.variants["hf-generate"]["summary"]["ops_per_token"] > 0


@pytest.mark.slow
def test_serving_memory_serves_every_request_within_the_estimate():
    spec = ServingMemorySpec(model="whisper-tiny", scale="full", max_num_seqs=2, num_gpu_blocks=400)
    res = _checked(probe_function("serving-memory")(spec), "serving-memory", ["whisper-tiny"], 1)
    run = res.runs("whisper-tiny")[0]
    assert run["tokens"] == [3, 3] and 0 < run["peak_gib"] <= run["estimate_gib"]
    assert run["after_load_gib"] <= run["peak_gib"]


@pytest.mark.slow
def test_spawn_cost_times_fresh_processes_of_both_modes():
    """One timed fresh process a mode, no untimed ones (each costs an import of torch: a minute under load)."""
    res = _checked(probe_function("spawn-cost")(SpawnCostSpec(repeats=1, max_num_seqs=2, warmup=False)), "spawn-cost",
                   ["inproc", "mp"], 1)
    assert res.env["in_process"] is False and res.params["variants"] == ["inproc", "mp"]
    assert all(r["startup_s"] > 0 for v in res.variants.values() for r in v["runs"])


@pytest.mark.slow
def test_explorer_ready_times_each_cell_of_the_page_in_a_fresh_kernel():
    from refimpl.lab.probes.explorer_ready import NOTEBOOK

    res = _checked(probe_function("explorer-ready")(ExplorerReadySpec(loads=1, trees=(str(ROOT),))),
                   "explorer-ready", [str(ROOT)], 1)
    run, summary = res.runs(str(ROOT))[0], res.variants[str(ROOT)]["summary"]
    import nbformat
    code = [c for c in nbformat.read(ROOT / NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    assert len(run["cells_s"]) == len(summary["cell_medians_s"]) == len(res.params["cells"]) == len(code)
    assert res.params["cells"][1].startswith("from refimpl.lab.explore.explorer_panels import")
    assert run["ready_s"] >= sum(run["cells_s"]) > 0 and run["kernel_start_s"] > 0
    assert summary["ready_s"]["n"] == 1 and res.env["in_process"] is False and len(res.params["loadavg"]) == 2


def test_explorer_ready_refuses_a_page_that_raises(tmp_path):
    import nbformat

    from refimpl.lab.probes.explorer_ready import NOTEBOOK, load_page
    (tmp_path / "notebooks").mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")]), tmp_path / NOTEBOOK)
    with pytest.raises(ConfigError, match="ZeroDivisionError") as e:
        load_page(tmp_path, cell_timeout=60)
    assert e.value.field == "trees"
