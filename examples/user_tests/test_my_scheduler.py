"""A user's invariant on the V1 scheduler, checked at every step of refimpl's Scheduler."""
from refimpl.testing import (
    FakeModelRunner,
    create_requests,
    create_scheduler,
    cross_attention_blocks,
    run_to_completion,
)


def check_kv_blocks(scheduler, num_blocks: int, cross_blocks: int) -> None:
    """Blocks held by running requests plus free blocks account for the pool (less the null
    block); each running Whisper request holds exactly its cross-attention blocks."""
    kv = scheduler.kv_cache_manager
    held = 0
    for req in scheduler.running:
        self_ids, cross_ids = kv.get_block_ids(req.request_id)
        assert len(cross_ids) == cross_blocks, req.request_id
        held += len(self_ids) + len(cross_ids)
    assert held + kv.get_num_free_blocks() == num_blocks - 1


def test_kv_invariant_under_preemption():
    num_blocks = 1 + 2 * 123 + 40  # two requests fit whole, a third only partly: preemptions
    s = create_scheduler(num_blocks=num_blocks, max_num_seqs=4)
    cross = cross_attention_blocks(s.vllm_config)
    assert cross == 94
    for r in create_requests(6, max_tokens=300):
        s.add_request(r)
    steps = []
    done = run_to_completion(s, FakeModelRunner(cross_blocks=cross),
                             on_step=lambda i, so: steps.append(check_kv_blocks(s, num_blocks, cross)))
    assert len(done) == 6 and all(len(o.output_token_ids) == 300 for o in done.values())
    assert sum(o.num_preemptions for o in done.values()) > 0
