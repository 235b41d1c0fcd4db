"""The rows reproduce their releases: docs/background.md's pass table (HF passes by phase,
frames and tokens at 128k) against the worst-case functions row by row, the worst-case
image per rule, the frame cap and fitting, the profiled item (issue 21) and old names.

Nothing here starts a 128k engine: the figures come from ``refimpl.multimodal.worst_case``
(no HF pass, no dummy array), whose pass counts tests/engine/test_engine_startup.py checks against
real start-ups at a small context.
"""
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.core import EngineCore
from refimpl.errors import InvalidInputError
from refimpl.lab.bench.schema import Result
from refimpl.lab.docs_gen import pass_table as make_pass_table
from refimpl.multimodal.worst_case import lookup_specs, max_tokens_per_item, profile_dummy
from refimpl.testing import create_requests
from refimpl.variants import (
    ENCODER_LEN_VARIANTS,
    LEGACY_NAMES,
    STARTUP_VARIANTS,
    get_startup_variant,
    legacy_name,
)

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs/background.md").read_text()


def qwen(max_model_len=4096, max_cells=None, **kw):
    px = {"mm_processor_kwargs": {"max_pixels": 28 * 28 * max_cells}} if max_cells else {}
    return ModelConfig("qwen2.5-vl-3b", max_model_len=max_model_len, device="cpu", scale="small", **px, **kw)


@pytest.mark.parametrize("row", list(STARTUP_VARIANTS))
def test_pass_table_row_at_128k_is_the_computed_one(row):
    doc = make_pass_table.parse_table(DOC, "passes")
    assert doc[row] == make_pass_table.pass_row(row, *make_pass_table.configs())


def test_docs_tables_are_generated_from_the_rows():
    assert make_pass_table.parse_table(DOC, "rows") == make_pass_table.parse_table(
        make_pass_table.replace_block(DOC, "rows", make_pass_table.rows_table()), "rows")
    assert set(make_pass_table.parse_table(DOC, "passes")) == set(STARTUP_VARIANTS)


@pytest.mark.parametrize("rule,tokens", [("square", 25), ("factor-pair", 30), ("true-max", 77)])
def test_worst_case_image_per_rule(rule, tokens):
    """Up to 0.12 a square, from 0.13.0 (PR #29692) the closest factor pair, ours the true
    maximum over aspect ratios (a 3200 x 16 strip the HF processor accepts): 30 cells allowed."""
    assert max_tokens_per_item(qwen(max_cells=30), "refimpl", worst_case=rule)["image"] == tokens
    release = {"square": "0.11.1", "factor-pair": "0.13.0", "true-max": "refimpl"}[rule]
    assert max_tokens_per_item(qwen(max_cells=30), release)["image"] == tokens


def test_frame_cap_and_fitting():
    """At 4096 tokens with 256-token frame pairs: vLLM 0.9.x builds 16 frames (its cap) and
    budgets 2048 tokens; 0.11.0 14 frames; the kit fits 32 frames, 4096 tokens."""
    mc = qwen(4096, max_cells=256)
    frames = {r: next(s for s in lookup_specs(mc, r) if s[0] == "video")[1] for r in ("0.9.0", "0.11.0", "refimpl")}
    assert frames == {"0.9.0": 16, "0.11.0": 14, "refimpl": 32}
    assert max_tokens_per_item(mc, "0.9.0")["video"] == 2048
    assert max_tokens_per_item(mc, "refimpl")["video"] == 4096
    # until 0.10.1 the image tokens left seq_len first: at 128k, 12 frames against 14
    big = qwen(128000)
    assert max_tokens_per_item(big, "0.9.2")["video"] == 98304
    assert max_tokens_per_item(big, "0.10.2")["video"] == 114688


PER_ITEM_MAX = [n for n, v in STARTUP_VARIANTS.items() if v.profile_seq_len == "per-item-max"]


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.sampled_from(PER_ITEM_MAX), max_model_len=st.sampled_from([1024, 4096, 20000, 128000]),
       cells=st.sampled_from([16, 30, 64, 256, 1024, 16384]), image=st.integers(0, 2),
       video=st.integers(0, 2), batched=st.sampled_from([256, 1024, 8192]))
def test_profiled_tokens_are_the_per_item_maximum(row, max_model_len, cells, image, video, batched):
    """Issue 21: in the kit's default (and shape-only), the profile run's item is the
    per-item maximum that compute_encoder_budget and admission use, whatever the limits,
    max_pixels, context and batching budget."""
    mc = qwen(max_model_len, max_cells=cells, limit_mm_per_prompt={"image": image, "video": video})
    dummy = profile_dummy(mc, SchedulerConfig(max_num_batched_tokens=batched), row)
    per_item = max_tokens_per_item(mc, row)
    if not per_item:
        assert dummy is None
        return
    assert dummy.tokens == dummy.per_item_max == max(per_item.values())


def test_release_rows_keep_their_profile_dummy():
    """The releases that built the dummy at max_num_batched_tokens keep that line: issue 21's
    configuration profiles far less than the per-item maximum under 0.9.0 and 0.10.2."""
    mc = qwen(4096, max_cells=64, limit_mm_per_prompt={"image": 0, "video": 1})
    sc = SchedulerConfig(max_num_batched_tokens=1024)
    for row in ("0.8.5", "0.9.0", "0.9.2", "0.10.2"):
        assert get_startup_variant(row).profile_seq_len == "max_num_batched_tokens"
    old = profile_dummy(qwen(128000), SchedulerConfig(), "0.9.0")
    assert (old.spec[1], old.tokens, old.per_item_max) == (1, 16384, 98304)  # one frame, padded to two
    assert profile_dummy(mc, sc, "refimpl").tokens == 4068 == max_tokens_per_item(mc, "refimpl")["video"]


def test_old_names_label_the_rows_they_were():
    assert legacy_name("hash-nocopy") == "0.9.0+#19484" and legacy_name("encoder-batch@4") == "audios-per-step@4"
    for old, new in LEGACY_NAMES.items():
        assert old not in STARTUP_VARIANTS or old == "shape-only"
        assert new in STARTUP_VARIANTS or new in ENCODER_LEN_VARIANTS, (old, new)
    assert STARTUP_VARIANTS["0.9.0+#19484"].mm.hash_byte_path == "v0.9.2"
    assert STARTUP_VARIANTS["0.9.0+#19484"].formula_models == ()  # not 0.9.2: no formula
    for path in sorted(ROOT.glob("results/*/*.json")):  # committed results load under row names
        res = Result.load(path)
        if res.bench in ("wer", "spawn-cost", "throughput-sweep", "calibrate"):
            continue
        known = STARTUP_VARIANTS if res.bench in ("startup", "budget") else ENCODER_LEN_VARIANTS
        assert all(v.partition("@")[0] in known or v == "hf-generate" for v in res.variants), path


@pytest.mark.slow
def test_no_admitted_item_is_larger_than_the_profiled_one():
    """Issue 21 kind 3, admission side: under the kit's default the scheduler refuses an item
    above the profiled one, even where the batching budget would hold it (a video of more,
    smaller frames); a release row keeps vLLM's budget-only bound."""
    mc = qwen(4096, max_cells=64, limit_mm_per_prompt={"image": 0, "video": 1})
    sc = SchedulerConfig(max_num_batched_tokens=8192)
    core = EngineCore(VllmConfig(mc, sc, CacheConfig(num_gpu_blocks=600)))
    profiled = core.report.profile_tokens_per_item
    assert profiled == max_tokens_per_item(mc, "refimpl")["video"] == core.scheduler.encoder_item_limit
    too_big = create_requests(1, model="qwen2.5-vl-3b", prompt_len=4090, num_mm_items=1,
                              mm_len=profiled + 2, max_tokens=1)[0]
    with pytest.raises(InvalidInputError) as e:
        core.add_request(too_big)
    assert (e.value.field, e.value.limit) == ("mm_inputs", profiled)
    core.add_request(create_requests(1, model="qwen2.5-vl-3b", prompt_len=4090, num_mm_items=1,
                                     mm_len=profiled, max_tokens=1, prefix="ok")[0])
