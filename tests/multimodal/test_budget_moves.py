"""Names that moved to refimpl.multimodal.encoder_budget keep their old import paths for a release, with a
DeprecationWarning, and are the same objects."""
import importlib

import pytest

from refimpl.multimodal import encoder_budget


@pytest.mark.parametrize("module,name", [("refimpl.multimodal.worst_case", "max_items_per_batch"),
                                         ("refimpl.multimodal.worst_case", "profile_seq_len"),
                                         ("refimpl.multimodal.worst_case", "ProfileDummy"),
                                         ("refimpl.engine.startup_plan", "cache_on")])
def test_a_moved_name_warns_and_is_the_same(module, name):
    mod = importlib.import_module(module)
    with pytest.deprecated_call(match=f"encoder_budget.{name}"):
        assert getattr(mod, name) is getattr(encoder_budget, name)
    with pytest.raises(AttributeError):
        mod.no_such_name  # noqa: B018
