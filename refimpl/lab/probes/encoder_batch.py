"""Qwen2.5-VL's vision encoder on frame pairs by batch size (issue 43): seconds per pair when the
pairs of one frame size are encoded alone, in a few, or as many as a profile video holds. The
calibration (refimpl/lab/bench/calibrate_sections.py ``ENCODER_PAIRS``) times one batch per size;
this probe says what that choice costs the price of another batch. The forward is the runner's own
(``GPUModelRunner._run_encoder``, as vLLM's gpu_model_runner ``_execute_mm_encoder``), on the
small-scale model start-up builds, torch on one thread; each timed call as the calibration times it
(``calibrate_measure.measure``: collector run and free heap handed back first)."""
from __future__ import annotations

from functools import partial

from refimpl.lab.bench.calibrate_measure import measure
from refimpl.lab.bench.calibrate_sections import PATCH_DIM, runner_config, video_pairs
from refimpl.lab.bench.common import set_single_thread
from refimpl.lab.bench.schema import Result
from refimpl.lab.probes.common import check_fits, result, variant
from refimpl.lab.probes.specs import EncoderBatchSpec

__all__ = ["encoder_batch"]


def encoder_batch(spec: EncoderBatchSpec) -> Result:
    """Each case's forward timed ``draws`` times (after one untimed forward of the first case), the cases
    in order on even draws and reversed on odd ones; a variant per case (``SIDExPAIRS``) whose runs are
    ``{"s_per_pair", "s"}``, with ``tokens_per_pair`` (the merged tokens of one pair: (side/28)^2) and
    ``pairs``. Refuses (InsufficientMemoryError naming ``cases``) a largest batch whose inputs and ~30 kB
    of activations per token exceed available memory."""
    spec.check()
    cases = spec.pairs()
    tokens = max(p * (s // 28) ** 2 for s, p in cases)
    check_fits("cases", sum(p * (s // 14) ** 2 * PATCH_DIM * 4 for s, p in cases) + tokens * 30_000,
               f"the inputs and the largest forward's activations ({tokens} tokens)")
    from refimpl.worker.gpu_model_runner import GPUModelRunner
    threads = set_single_thread()
    runner = GPUModelRunner(runner_config(spec.model))
    runner.load_model()
    batches = [video_pairs(s, p) for s, p in cases]
    runs: list[list[dict[str, float]]] = [[] for _ in cases]
    measure(partial(runner._run_encoder, "video", batches[0]))  # untimed
    for k in range(spec.draws):
        order = range(len(cases)) if k % 2 == 0 else reversed(range(len(cases)))
        for j in order:
            s = measure(partial(runner._run_encoder, "video", batches[j]))[0]
            runs[j].append({"s_per_pair": s / cases[j][1], "s": s})
    variants = {c: variant(r, ["s_per_pair", "s"], tokens_per_pair=(s // 28) ** 2, pairs=p)
                for c, r, (s, p) in zip(spec.cases, runs, cases)}
    return result(spec, variants, torch_num_threads=threads)
