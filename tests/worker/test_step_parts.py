"""The parts of issue 42's serving step: the dispatch counter, the staging buffer, the cross K/V
rows and the batched cross-attention reads, each against a direct computation."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from refimpl.attention.cross_attention import (
    batched_cross_attention,
    gather_cross_kv,
    gather_cross_kv_batched,
)
from refimpl.attention.paged_attention import (
    build_attention_mask,
    pad_queries,
    paged_attention,
    query_padding,
    reshape_and_cache,
    write_kv,
)
from refimpl.testing import DispatchCounter
from refimpl.utils.cpu_gpu_buffer import CpuGpuBuffer, StagingBuffer
from refimpl.worker.cross_kv_slots import CrossKVSlots

T = torch.tensor([3, 1, 2])


@pytest.mark.parametrize("fn, sync", [
    (lambda: bool((T > 0).all()), "aten._local_scalar_dense"),
    (lambda: int(T.max()), "aten._local_scalar_dense"),
    (lambda: T.sum().item(), "aten._local_scalar_dense"),
    (lambda: T.nonzero(), "aten.nonzero"),
    (lambda: T[T > 1], "aten.index"),
    (lambda: torch.repeat_interleave(torch.arange(3), T), "aten.repeat_interleave"),
])
def test_counter_sees_each_sync(fn, sync):
    with DispatchCounter() as c:
        fn()
    assert c.syncs == {sync: 1} and c.num_syncs == 1 and c.num_ops >= 1


def test_counter_passes_sync_free_ops():
    with DispatchCounter() as c:
        torch.repeat_interleave(torch.arange(3), T, output_size=6)
        T[torch.tensor([0, 2])] + 1
        torch.zeros(4).copy_(torch.ones(4))
    assert c.num_syncs == 0 and c.ops["aten.add"] == 1
    c.reset()
    assert c.num_ops == 0


def test_staging_buffer_packs_shapes_in_one_copy_and_grows():
    buf = StagingBuffer(torch.device("cpu"), capacity=8)
    arrays = {"a": np.arange(5), "table": np.arange(12).reshape(3, 4), "one": np.array([7])}
    out = buf.stage(arrays)
    assert buf.num_copies == 1 and buf.capacity >= 18
    for k, a in arrays.items():
        assert out[k].dtype == torch.int64 and out[k].tolist() == a.tolist()
    out = buf.stage({"b": np.array([9, 8])})
    assert buf.num_copies == 2 and out["b"].tolist() == [9, 8]
    cpu = CpuGpuBuffer(4, dtype=torch.int64, device=torch.device("cpu"))
    assert cpu.gpu is cpu.cpu and not cpu.cpu.is_pinned()    # no device: no copy, nothing pinned
    cpu.np[:] = [1, 2, 3, 4]
    assert cpu.copy_to_gpu(2).tolist() == [1, 2]


def test_cross_kv_rows_condense_on_remove_and_are_kept_until_released():
    s = CrossKVSlots(2, 1, 3, 2, torch.float32, torch.device("cpu"), max_rows=2)
    for r in "abc":
        s.add(r)
        for t in s.layers:
            t[:, s.row_of[r]] = ord(r)
    assert s.capacity >= 3 and s.rows(["a", "b", "c"]) is None and s.rows(["b", "a"]) == [1, 0]
    s.remove("a")                                     # c moves into a's row
    assert s.req_ids == ["c", "b"] and s.row_of == {"c": 0, "b": 1}
    assert all((t[:, 0] == ord("c")).all() and (t[:, 1] == ord("b")).all() for t in s.layers)
    s.remove("zz")                                    # holds no row: nothing happens
    with pytest.raises(RuntimeError):
        s.release()                                   # rows still held
    s.remove("b")
    s.remove("c")
    cap, held = s.capacity, [t.data_ptr() for t in s.layers]
    assert s.req_ids == [] and cap >= 3               # kept: the next round allocates nothing
    s.add("d")
    assert s.capacity == cap and [t.data_ptr() for t in s.layers] == held and s.row_of == {"d": 0}
    s.remove("d")
    s.release()
    assert s.layers == [] and s.capacity == 0 and s.row_bytes == 2 * 2 * 3 * 2 * 4


def _paged(lens, bs=4, h=2, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    nb = -(-max(lens) // bs)
    kv = torch.zeros(2, len(lens) * nb + 1, bs, h, d)
    table = torch.arange(1, len(lens) * nb + 1).view(len(lens), nb).flip(1)     # blocks out of order
    keys = [torch.randn(n, h, d, generator=g) for n in lens]
    vals = [torch.randn(n, h, d, generator=g) for n in lens]
    for i, n in enumerate(lens):
        pos = torch.arange(n)
        reshape_and_cache(kv, keys[i], vals[i], table[i][pos // bs] * bs + pos % bs)
    return kv, table, keys, vals, g


def test_batched_cross_attention_equals_per_request_sdpa():
    L, q_lens = 10, [1, 3, 2]
    kv, table, keys, vals, g = _paged([L] * 3)
    k, v = gather_cross_kv_batched(kv, table, L)
    assert k.shape == (3, 2, L, 8)
    for i in range(3):
        torch.testing.assert_close(torch.stack([k[i], v[i]]), gather_cross_kv(kv, table[i].tolist(), L))
    qsl = np.concatenate([[0], np.cumsum(q_lens)])
    q = torch.randn(int(qsl[-1]), 2, 8, generator=g)
    req_idx, local_idx, max_q = query_padding(qsl)
    out = batched_cross_attention(q, k, v, padding=(torch.from_numpy(req_idx), torch.from_numpy(local_idx), max_q),
                                  scale=0.3)
    dec = batched_cross_attention(q[qsl[1:] - 1], k, v, scale=0.3)                 # one query each
    for i in range(3):
        ref = F.scaled_dot_product_attention(q[qsl[i]:qsl[i + 1]].transpose(0, 1), keys[i].transpose(0, 1),
                                             vals[i].transpose(0, 1), scale=0.3).transpose(0, 1)
        torch.testing.assert_close(out[qsl[i]:qsl[i + 1]], ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(dec[i], ref[-1], atol=1e-5, rtol=1e-5)


def test_host_padding_equals_device_padding_without_a_sync():
    lens, q_lens = [5, 6, 9], [5, 1, 3]
    kv, table, *_ , g = _paged(lens)
    qsl = np.concatenate([[0], np.cumsum(q_lens)])
    qsl_t, seq = torch.from_numpy(qsl), torch.tensor(lens)
    q = torch.randn(int(qsl[-1]), 2, 8, generator=g)
    req_idx, local_idx, max_q = query_padding(qsl)
    pad = (torch.from_numpy(req_idx), torch.from_numpy(local_idx), max_q)
    with DispatchCounter() as c:
        mask = build_attention_mask(qsl_t, seq, table.shape[1] * 4, causal=True, max_q=max_q)
        fast = paged_attention(q, kv, qsl_t, seq, table, causal=True, mask=mask, padding=pad)
    assert c.num_syncs == 0
    torch.testing.assert_close(fast, paged_attention(q, kv, qsl_t, seq, table, causal=True))
    padded, ri, li = pad_queries(q, qsl_t)
    assert ri.tolist() == req_idx.tolist() and li.tolist() == local_idx.tolist() and padded.shape[1] == max_q


def test_write_kv_still_skips_negative_slots():
    kv = torch.zeros(2, 2, 2, 1, 1)
    write_kv(kv, torch.ones(2, 1, 1), torch.ones(2, 1, 1), torch.tensor([-1, 3]))
    assert kv[0].flatten().tolist() == [0, 0, 0, 1]
