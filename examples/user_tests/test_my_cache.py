from hypothesis import given, settings
from my_cache import MyLRU

from refimpl.testing import ReferenceLRU
from refimpl.testing.strategies import cache_ops


@settings(max_examples=200, deadline=None)
@given(cache_ops(num_keys=6, max_nbytes=3000))
def test_my_cache_matches_the_reference_step_by_step(ops):
    mine, ref = MyLRU(8000), ReferenceLRU(8000)
    for op in ops:
        name, *args = op
        assert getattr(mine, name)(*args) == getattr(ref, name)(*args), op
        assert ref.mismatches(mine) == [], op
