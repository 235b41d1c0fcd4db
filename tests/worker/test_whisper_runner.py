"""The correctness oracle of the paged-KV Whisper runner.

whisper-tiny with random weights (re-drawn at std 0.2 so the tokens depend on the audio,
the position and the request: at the loader's default 0.02 every audio decodes to the same
repeated token, which would not catch a request mix-up), real speech clips through the real
feature extractor. Reference: ``transformers.GenerationMixin.generate`` called directly on
the model (plain greedy, skipping WhisperForConditionalGeneration.generate's language /
timestamp / suppress-token logic, no EOS stop), batched, same decoder prompt
[50258, 50259, 50359, 50363]. Our side: the real Scheduler driving GPUModelRunner with
requests arriving at different steps with different max_tokens (and, in one test, KV
pressure forcing preemption + recompute). The sampled tokens must be EXACTLY equal.
"""
import numpy as np
import pytest
import torch
from transformers import GenerationConfig, GenerationMixin, WhisperFeatureExtractor

from refimpl.attention.cross_attention import (
    CrossAttentionBuilder,
    cross_attention,
    dense_cross_attention,
    gather_cross_kv,
    key_segments,
)
from refimpl.attention.paged_attention import paged_attention, write_kv
from refimpl.audio import make_request_audios
from refimpl.config import get_preprocessor_dict
from refimpl.core.sched.scheduler import Scheduler
from refimpl.errors import EncoderLengthMismatchError
from refimpl.request import Request
from refimpl.sample.sampler import Sampler
from refimpl.sampling_params import SamplingParams
from refimpl.testing import WHISPER_PROMPT, FakeRegistry, create_vllm_config
from refimpl.worker.gpu_model_runner import GPUModelRunner
from refimpl.worker.model_loader import initialize_dummy_weights

pytestmark = pytest.mark.slow  # engine runs against transformers' generate()


BLOCK = 8                    # 1500 encoder positions -> 188 cross blocks, the last one partial
MAX_TOKENS = [10, 14, 7, 12]
ARRIVAL_STEP = [0, 0, 3, 5]


@pytest.fixture(scope="module")
def setup():
    cfg = create_vllm_config(block_size=BLOCK, max_num_seqs=8)
    runner = GPUModelRunner(cfg)
    runner.load_model()
    initialize_dummy_weights(runner.model, seed=0, std=0.2)
    fe = WhisperFeatureExtractor(**get_preprocessor_dict("whisper-tiny"))
    audios = make_request_audios(len(MAX_TOKENS), seed=1, max_s=8.0)
    feats = fe(audios, sampling_rate=16000, return_tensors="pt").input_features   # (4, 80, 3000)
    gc = GenerationConfig(max_new_tokens=max(MAX_TOKENS), do_sample=False, num_beams=1,
                          decoder_start_token_id=WHISPER_PROMPT[0], pad_token_id=50257,
                          eos_token_id=None, use_cache=True)
    dec = torch.tensor([WHISPER_PROMPT] * len(audios))
    with torch.inference_mode():
        ref = GenerationMixin.generate(runner.model, input_features=feats, decoder_input_ids=dec,
                                       attention_mask=torch.ones_like(dec), generation_config=gc)
    return cfg, runner, feats, ref[:, len(WHISPER_PROMPT):].tolist()


def _serve(cfg, runner, feats, num_blocks, params=None, only=None, read="dense-once"):
    """Serve the requests (all, or the indices in ``only``); ``params(i)`` gives request
    i's SamplingParams (default greedy, MAX_TOKENS[i], ignore_eos); ``read``: the runner's
    cross-attention read (CacheConfig.cross_attention_read)."""
    params = params or (lambda i: SamplingParams(max_tokens=MAX_TOKENS[i], ignore_eos=True))
    which = range(len(MAX_TOKENS)) if only is None else only
    runner.initialize_kv_cache(num_blocks)         # fresh KV cache and runner state
    runner.whisper_runner.dense_cross = read == "dense-once"
    sched = Scheduler(cfg, num_blocks, encoder_compute_budget=1500, encoder_cache_size=1500)
    done, step = {}, 0
    while len(done) < len(which):
        for i, arrive in enumerate(ARRIVAL_STEP):
            if arrive == step and i in which:
                sched.add_request(Request(f"r{i}", list(WHISPER_PROMPT), params(i),
                                          mm_inputs=[{"input_features": feats[i]}]))
        so = sched.schedule()
        for out in sched.update_from_output(so, runner.execute_model(so)):
            done[out.request_id] = out
        step += 1
        assert step < 200
    return done


@pytest.mark.parametrize("read", ["dense-once", "paged-runs"])
def test_paged_greedy_equals_transformers_generate(setup, read):
    cfg, runner, feats, ref = setup
    assert len({tuple(r[:5]) for r in ref}) == len(ref), "oracle must differ across audios"
    done = _serve(cfg, runner, feats, num_blocks=2000, read=read)
    for i, n in enumerate(MAX_TOKENS):
        assert done[f"r{i}"].output_token_ids == ref[i][:n], f"r{i}"
    assert set(runner.step_timings) >= {"prepare", "model", "sample"}


@pytest.mark.parametrize("read", ["dense-once", "paged-runs"])
def test_preemption_recompute_equals_transformers_generate(setup, read):
    cfg, runner, feats, ref = setup
    # 3 requests' cross blocks + a few self blocks: running requests must be preempted.
    done = _serve(cfg, runner, feats, num_blocks=1 + 3 * 188 + 4, read=read)
    assert sum(o.num_preemptions for o in done.values()) > 0
    for i, n in enumerate(MAX_TOKENS):
        assert done[f"r{i}"].output_token_ids == ref[i][:n], f"r{i}"


def test_seeded_sampling_survives_preemption_and_batch_composition(setup):
    """Issue 8, kind 1: a seeded request samples the same tokens with and without KV
    pressure (preempted and recomputed in one run, batched differently in the other): its
    generator continues after preemption instead of restarting from the seed."""
    cfg, runner, feats, _ = setup
    params = lambda i: SamplingParams(max_tokens=MAX_TOKENS[i], ignore_eos=True,  # noqa: E731
                                      temperature=1.0, seed=100 + i)
    free = _serve(cfg, runner, feats, num_blocks=2000, params=params, only=[0, 1])
    pressed = _serve(cfg, runner, feats, num_blocks=1 + 2 * 188 + 3, params=params, only=[0, 1])
    assert any(o.num_preemptions for o in pressed.values())
    for rid, out in free.items():
        assert pressed[rid].output_token_ids == out.output_token_ids, rid


def test_partial_prefill_draws_nothing_from_the_generator(setup):
    """A prompt computed in two chunks samples the same token as one whole step: the
    chunk that ends inside the prompt gets no token and leaves the generator untouched
    (vLLM rewinds the generator's offset there)."""
    from refimpl.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
    cfg, runner, feats, _ = setup
    sp = SamplingParams(max_tokens=4, temperature=1.0, seed=7)
    blocks = (list(range(1, 3)), list(range(3, 3 + 188)))

    def step(new, cached, n):
        return runner.execute_model(SchedulerOutput(new, cached or CachedRequestData.make_empty(),
                                                    {"r": n}, n, {"r": [0]} if new else {}, set()))
    tokens = []
    for chunks in ([4], [2, 2]):
        runner.initialize_kv_cache(200)
        new = [NewRequestData("r", list(WHISPER_PROMPT), [{"input_features": feats[0]}], sp, blocks, 0)]
        out = step(new, None, chunks[0])
        if len(chunks) == 2:
            assert out.sampled_token_ids == [[]]
            gen = runner.whisper_runner.requests["r"].generator
            assert torch.equal(gen.get_state(), torch.Generator().manual_seed(7).get_state())
            out = step([], CachedRequestData(["r"], [None], [2]), 2)
        tokens.append(out.sampled_token_ids)
    assert tokens[0] == tokens[1] and len(tokens[0][0]) == 1


def _paged_setup(lens, block_size, h=3, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    nb = [-(-n // block_size) for n in lens]
    perm = torch.randperm(sum(nb) + 5, generator=g)[:sum(nb)] + 1      # scattered ids, 0 unused
    tables, kv = [], torch.randn(2, sum(nb) + 6, block_size, h, d, generator=g)
    keys = [torch.randn(n, h, d, generator=g) for n in lens]
    vals = [torch.randn(n, h, d, generator=g) for n in lens]
    off = 0
    for i, n in enumerate(lens):
        blocks = perm[off:off + nb[i]].tolist()
        off += nb[i]
        tables.append(blocks + [0] * (max(nb) - nb[i]))
        pos = torch.arange(n)
        slots = torch.tensor(blocks)[pos // block_size] * block_size + pos % block_size
        write_kv(kv, keys[i], vals[i], slots)
    return kv, torch.tensor(tables), keys, vals, g


@pytest.mark.parametrize("block_size", [4, 16])
def test_paged_cross_attention_equals_unpaged_at_block_boundaries(block_size):
    lens = [1, block_size - 1, block_size, block_size + 1, 2 * block_size, 1500]
    kv, table, keys, vals, g = _paged_setup(lens, block_size)
    q_lens = [1, 2, 1, 3, 1, 2]
    q = torch.randn(sum(q_lens), 3, 8, generator=g)
    qsl = torch.tensor([0] + np.cumsum(q_lens).tolist())
    out = paged_attention(q, kv, qsl, torch.tensor(lens), table, causal=False, scale=0.3)
    segs = [key_segments([b for b in row if b], n, block_size) for row, n in zip(table.tolist(), lens)]
    fast = cross_attention(q, kv, qsl.tolist(), segs, scale=0.3)      # views of runs, no gather
    dense_kv = [gather_cross_kv(kv, [b for b in row if b], n) for row, n in zip(table.tolist(), lens)]
    assert all(d.shape == (2, 3, n, 8) and d.is_contiguous() for d, n in zip(dense_kv, lens))
    dense = dense_cross_attention(q, qsl.tolist(), dense_kv, scale=0.3)
    for i in range(len(lens)):
        qi = q[qsl[i]:qsl[i + 1]].transpose(0, 1)
        ref = torch.nn.functional.scaled_dot_product_attention(
            qi, keys[i].transpose(0, 1), vals[i].transpose(0, 1), scale=0.3).transpose(0, 1)
        torch.testing.assert_close(out[qsl[i]:qsl[i + 1]], ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(fast[qsl[i]:qsl[i + 1]], ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(dense[qsl[i]:qsl[i + 1]], ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(dense_kv[i][0].transpose(0, 1), keys[i])
    with pytest.raises(ValueError):
        gather_cross_kv(kv, [1, 2], 2 * block_size + 1)


def test_key_segments_cover_exactly_the_valid_slots():
    bs = 16
    rev = list(range(194, 100, -1))                 # 94 blocks handed out tail first (a freed request)
    segs = key_segments(rev, 1500, bs)     # full blocks 102..194 are one run; tail block 101: 12 slots
    assert segs == [(102 * bs, 93 * bs), (101 * bs, 12)]
    assert sum(n for _, n in segs) == 1500
    slots = sorted(s + j for s, n in segs for j in range(n))
    want = sorted(b * bs + j for k, b in enumerate(rev) for j in range(bs) if k * bs + j < 1500)
    assert slots == want
    assert key_segments(list(range(5, 99)), 1500, bs) == [(5 * bs, 1500)]     # one view
    assert key_segments([7, 3, 4], 40, bs) == [(3 * bs, 24), (7 * bs, 16)]    # tail 4 follows 3
    with pytest.raises(ValueError):
        key_segments([1, 2], 40, bs)


def test_paged_causal_attention_equals_unpaged():
    lens, q_lens = [5, 16, 17, 33], [5, 1, 3, 1]       # a prefill, decodes, a 3-token chunk
    kv, table, keys, vals, g = _paged_setup(lens, 16)
    q = torch.randn(sum(q_lens), 3, 8, generator=g)
    qsl = torch.tensor([0] + np.cumsum(q_lens).tolist())
    out = paged_attention(q, kv, qsl, torch.tensor(lens), table, causal=True)
    for i, (n, m) in enumerate(zip(lens, q_lens)):
        mask = torch.arange(n)[None] <= torch.arange(n - m, n)[:, None]
        ref = torch.nn.functional.scaled_dot_product_attention(
            q[qsl[i]:qsl[i + 1]].transpose(0, 1), keys[i].transpose(0, 1), vals[i].transpose(0, 1),
            attn_mask=mask, scale=1.0).transpose(0, 1)
        torch.testing.assert_close(out[qsl[i]:qsl[i + 1]], ref, atol=1e-5, rtol=1e-5)


def test_cross_attention_builder_reads_encoder_len_every_step():
    reg = FakeRegistry()
    cfg = create_vllm_config(block_size=16, encoder_len_variant="0.10.2", mm_registry=reg)
    builder = CrossAttentionBuilder(cfg, 16, torch.device("cpu"))
    calls = reg.calls
    blocks = [list(range(1, 95)), list(range(95, 189))]
    qsl = np.array([0, 4, 5])
    md = builder.build(qsl, np.array([1500, 0]), blocks)       # r0 first step, r1 decoding
    md2 = builder.build(qsl, np.array([0, 0]), blocks)
    assert reg.calls == calls + 2
    with pytest.raises(EncoderLengthMismatchError):        # 64 blocks cannot hold 1500
        builder.build(qsl, np.array([1500, 0]), [list(range(1, 65)), list(range(65, 129))])
    reg.value = 1024                 # metadata length that is not the model's own
    with pytest.raises(EncoderLengthMismatchError):
        CrossAttentionBuilder(cfg, 16, torch.device("cpu"), 1500).build(qsl, np.array([0, 0]), blocks)
    assert md.seq_lens.tolist() == [1500, 1500] and md.max_seq_len == 1500
    assert md.slot_mapping.tolist() == list(range(16, 16 + 1500)) and md2.slot_mapping.numel() == 0
    assert md.block_table.shape == (2, 94)


def test_runner_reads_encoder_len_once_at_init(setup):
    reg = FakeRegistry()  # the runner's site reads the config from PR #24989 on
    cfg = create_vllm_config(block_size=16, encoder_len_variant="0.10.2+#24989", mm_registry=reg)
    calls = reg.calls
    runner = GPUModelRunner(cfg)
    runner.model = setup[1].model
    runner.initialize_kv_cache(200)
    assert reg.calls == calls and runner.whisper_runner.encoder_len == 1500


def test_runner_refuses_a_wrong_encoder_len(setup):
    reg = FakeRegistry()
    cfg = create_vllm_config(block_size=16, encoder_len_variant="0.10.2", mm_registry=reg)
    reg.value = 1024                 # the alias of a batching budget, not the encoder's 1500
    runner = GPUModelRunner(cfg)
    runner.model = setup[1].model
    with pytest.raises(EncoderLengthMismatchError):
        runner.initialize_kv_cache(200)


def test_seeded_sampling_is_deterministic():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    params = [SamplingParams(temperature=t, seed=7 + i) for i, t in enumerate([0.0, 1.0, 0.7])]

    def draw():
        return Sampler()(logits, params, [torch.Generator().manual_seed(p.seed) for p in params])
    a, b = draw(), draw()
    assert a == b and a[0] == int(logits[0].argmax())
    assert all(0 <= t < 50 for t in a)
