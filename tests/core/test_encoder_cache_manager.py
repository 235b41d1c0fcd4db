"""EncoderCacheManager: space accounting in encoder tokens, per request and item."""
from refimpl.core.encoder_cache_manager import EncoderCacheManager
from refimpl.multimodal.inputs import PlaceholderRange
from refimpl.request import Request


def _req(rid: str, lengths: list[int]) -> Request:
    pos = [PlaceholderRange(10 * i, n) for i, n in enumerate(lengths)]
    return Request(rid, [1] * 100, mm_inputs=[{} for _ in lengths], mm_positions=pos)


def test_can_allocate_checks_compute_budget_and_space_left_after_this_step():
    m = EncoderCacheManager(cache_size=10)
    r = _req("a", [6, 4, 3])
    assert m.can_allocate(r, 0, encoder_compute_budget=10, num_tokens_to_schedule=0)
    assert not m.can_allocate(r, 0, encoder_compute_budget=5, num_tokens_to_schedule=0)
    assert m.can_allocate(r, 1, encoder_compute_budget=10, num_tokens_to_schedule=6)
    assert not m.can_allocate(r, 1, encoder_compute_budget=10, num_tokens_to_schedule=7)
    m.allocate(r, 0)
    assert m.num_free_slots == 4 and m.has_cache(r, 0) and not m.has_cache(r, 1)
    assert not m.can_allocate(r, 1, encoder_compute_budget=10, num_tokens_to_schedule=1)


def test_free_gives_space_back_once_and_forgets_the_request():
    m = EncoderCacheManager(cache_size=20)
    a, b = _req("a", [6, 4]), _req("b", [5])
    for r, i in ((a, 0), (a, 1), (b, 0)):
        m.allocate(r, i)
    assert m.num_free_slots == 5 and m.get_cached_input_ids(a) == {0, 1}
    m.free_encoder_input(a, 0)
    m.free_encoder_input(a, 0)  # already freed: no-op
    assert m.num_free_slots == 11 and m.get_cached_input_ids(a) == {1}
    m.free(a)
    m.free(a)
    assert m.num_free_slots == 15 and "a" not in m.cached and m.get_cached_input_ids(a) == set()
    m.free(b)
    assert m.num_free_slots == m.cache_size and not m.cached
