"""Cross-attention probes: the two reads of refimpl/attention/cross_attention.py on one decode step in
isolation (``read``), and on a long-running engine whose block pool fragments (``fragmentation``).

A fresh pool hands a request consecutive blocks (few key runs); blocks freed by finished requests come
back in another order, so later requests' blocks split into more runs. Until issue 42 paged-runs paid one
matmul pair per run on every step; since, neither read sees runs (dense-once reads the requests' rows of
one tensor per layer, paged-runs gathers every request's blocks in one call per layer), as vLLM's
attention kernels, which read K/V through the block table."""
from __future__ import annotations

import time

import torch

from refimpl.attention.cross_attention import (
    cross_attention,
    dense_cross_attention,
    gather_cross_kv,
    key_segments,
)
from refimpl.lab.bench.common import set_single_thread
from refimpl.lab.bench.schema import Result
from refimpl.lab.probes.common import check_fits, result, timed, variant
from refimpl.lab.probes.specs import CrossAttentionFragmentationSpec, CrossAttentionReadSpec

__all__ = ["read", "fragmentation"]


def read(spec: CrossAttentionReadSpec) -> Result:
    """``batch`` requests of one query each on ``encoder_len`` keys (``heads`` x ``head_dim``), every
    request's blocks one run (a fresh pool), torch on one thread. Variants ``paged-runs``
    (``cross_attention`` on views of the paged cache), ``dense-once`` (``dense_cross_attention`` on each
    request's gathered copy) and ``dense-copy`` (the copies, made once per request and layer); each run
    ``{"ms"}`` of one call. Raises AssertionError when the two reads disagree."""
    spec.check()
    set_single_thread()
    b, h, d, length, bs = spec.batch, spec.heads, spec.head_dim, spec.encoder_len, spec.block_size
    nb = -(-length // bs)
    check_fits("batch", 3 * 2 * (b * nb + 1) * bs * h * d * 4, "the paged cache and two sets of dense copies")
    g = torch.Generator().manual_seed(0)
    kv = torch.randn(2, b * nb + 1, bs, h, d, generator=g)
    blocks = [list(range(1 + i * nb, 1 + (i + 1) * nb)) for i in range(b)]
    q, qsl = torch.randn(b, h, d, generator=g), list(range(b + 1))
    segs = [key_segments(ids, length, bs) for ids in blocks]
    dense = [gather_cross_kv(kv, ids, length) for ids in blocks]
    torch.testing.assert_close(cross_attention(q, kv, qsl, segs), dense_cross_attention(q, qsl, dense))
    calls = {"paged-runs": lambda: cross_attention(q, kv, qsl, segs),
             "dense-once": lambda: dense_cross_attention(q, qsl, dense),
             "dense-copy": lambda: [gather_cross_kv(kv, ids, length) for ids in blocks]}
    return result(spec, {k: variant([{"ms": s * 1e3} for s in timed(fn, spec.iters)], ["ms"])
                         for k, fn in calls.items()}, torch_num_threads=torch.get_num_threads())


def fragmentation(spec: CrossAttentionFragmentationSpec) -> Result:
    """One in-process engine per read (encoder-length row 0.11.0, ``max_num_seqs``) serving the same EOS
    workload (``make_workload(num_requests, 0)``) ``runs`` times, the reads alternating run by run, torch
    on one thread. Each run: ``cpu_s`` of serving, ``requests_per_s`` and ``key_runs_per_request`` (the
    runs of the cross blocks each request is handed, counted after the run from the block ids recorded)."""
    spec.check()
    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.lab.bench import serve as W
    from refimpl.sampling_params import SamplingParams
    set_single_thread()
    handed: list[list[int]] = []
    engines = {}
    for r in spec.reads:
        engines[r] = e = LLMEngine.from_args(spec.model, encoder_len_variant="0.11.0", device="cpu",
                                             max_num_seqs=spec.max_num_seqs, process_mode="inproc",
                                             disable_mm_preprocessor_cache=True, cross_attention_read=r)
        runner = e.model_runner.whisper_runner
        new_state = runner._new_request_state

        def recorded(nr, old, new_state=new_state):   # records the block ids handed; changes nothing
            st = new_state(nr, old)
            handed.append(list(st.block_ids[1]))
            return st
        runner._new_request_state = recorded
    work, params = W.make_workload(spec.num_requests, 0), SamplingParams(max_tokens=spec.max_tokens)
    runs: dict[str, list[dict]] = {r: [] for r in spec.reads}
    for _ in range(spec.runs):
        for r, e in engines.items():
            handed.clear()
            c0 = time.process_time()
            served = W.serve_engine(e, work, params)
            cpu = time.process_time() - c0
            wr = e.model_runner.whisper_runner
            key_runs = [len(key_segments(ids, wr.encoder_len, wr.block_size)) for ids in handed]
            runs[r].append({"cpu_s": cpu, "requests_per_s": served["requests_per_s"],
                            "key_runs_per_request": sum(key_runs) / len(key_runs), "requests_handed": len(key_runs)})
    return result(spec, {r: variant(v, ["cpu_s", "requests_per_s", "key_runs_per_request"]) for r, v in runs.items()})
