"""Every row of docs/reliability.md's bad-input table (issue #4, part 5), from the same case
list the table is generated from (refimpl/testing/bad_inputs.py): a refimpl exception of the
expected type naming the expected field and limit, or the documented behaviour; never a
crash; the processors keep working afterwards."""
import pytest

from refimpl.testing.bad_input_kit import Kit, png_bytes, run_case
from refimpl.testing.bad_inputs import CASES


@pytest.fixture(scope="module")
def kit():
    return Kit()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(kit, case):
    out = run_case(case, kit)
    assert out.kind != "crashed", f"non-refimpl exception {out.exc_type}: {out.message}"
    if case.raises is None:
        assert out.kind == "accepted", f"expected acceptance, got {out.exc_type}: {out.message}"
        assert case.behaviour and case.check(out.result)
    else:
        assert out.kind == "raised", f"accepted: {out.message}"
        assert out.exc_type == case.raises.__name__
        assert (out.field, out.limit) == (case.field, case.limit), out.message
        assert case.field in out.message and str(case.limit) in out.message
    # the processors are still usable after the bad input
    if case.entry.startswith("Qwen"):
        assert kit.qwen.apply("<|image_pad|>", {"image": png_bytes()}).mm_placeholders["image"][0].length == 6


def test_refusals_name_a_user_setting_with_a_non_negative_limit(kit):
    """Issue 8, kind 6: no refusal carries a negative limit (a derived quantity gone wrong)."""
    for case in CASES:
        if case.raises is not None and isinstance(case.limit, (int, float)):
            assert case.limit >= 0, case.id
    assert run_case(next(c for c in CASES if c.id == "kv-num-gpu-blocks-100"), kit).field == "num_gpu_blocks"


def test_doc_table_lists_every_case():
    """docs/reliability.md was regenerated after the last change to the case list."""
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "reliability.md").read_text()
    missing = [c.id for c in CASES if f"`{c.id}`" not in doc]
    assert not missing, f"run python -m refimpl.lab.docs_gen.reliability_table; missing rows: {missing}"
