"""What each probe measures: frozen specs whose fields are the flags of ``refimpl probe NAME``
(tyro, as ``refimpl bench``). ``ProbeSpec.check`` refuses a bad one before anything runs, in the
benches' form: ConfigError naming the field, the limit and what was given."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from refimpl.errors import ConfigError, UnknownModelError
from refimpl.lab.bench.spec_types import check_types

__all__ = ["ProbeSpec", "FirstTouchSpec", "SpawnCostSpec", "CacheHitSpec", "RegistryCallSpec", "CrossAttentionReadSpec",
           "CrossAttentionFragmentationSpec", "EngineVsGenerateSpec", "StepOpsSpec", "ServingMemorySpec",
           "ExplorerReadySpec", "EncoderBatchSpec"]

READS = ("dense-once", "paged-runs")  # CacheConfig.cross_attention_read


class ProbeSpec:
    """Shared by the probes: ``name`` (the subcommand and the Result's ``bench``), the lower bound of
    each numeric field (``at_least``) and each field's allowed values (``choices``)."""
    name: ClassVar[str]
    at_least: ClassVar[dict[str, float]] = {}
    choices: ClassVar[dict[str, tuple[str, ...]]] = {}
    whisper: ClassVar[bool] = False  # ``model`` must be a Whisper model (it serves audio)

    def check(self) -> None:
        """ConfigError(field, limit, got) for the first field of the wrong type, below its bound or
        outside its choices; a model refimpl does not ship: UnknownModelError; for a Whisper probe a
        model that is not one, or ``max_tokens`` beyond what it decodes."""
        check_types(self)
        for f, low in self.at_least.items():
            if not getattr(self, f) >= low:
                raise ConfigError(f, f">= {low:g}", f"got {getattr(self, f)!r}")
        for f, allowed in self.choices.items():
            values = getattr(self, f)
            for v in values if isinstance(values, tuple) else (values,):
                if v not in allowed:
                    raise ConfigError(f, allowed, f"got {v!r}")
        model = getattr(self, "model", None)
        if model is None:
            return
        from refimpl.config import ModelConfig, check_model
        check_model(model)
        if self.whisper:
            from refimpl.lab.bench.serve_checks import check_max_tokens
            if not ModelConfig(model, device="cpu").is_encoder_decoder:
                raise UnknownModelError("model", "a Whisper model", f"refimpl probe {self.name} serves audio, got {model}")
            max_tokens = getattr(self, "max_tokens", None)
            if max_tokens is not None:
                check_max_tokens("max_tokens", max_tokens, model)

    def params(self) -> dict[str, Any]:
        """The Result's ``params``: every field, tuples as lists."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}  # type: ignore[call-overload]


@dataclass(frozen=True, kw_only=True)
class FirstTouchSpec(ProbeSpec):
    """What touching memory costs here: ``arrays`` fresh int64 arrays filled three times in one process
    (first touch, right after a free, after ``pause`` s idle), with free page reporting's state."""
    name: ClassVar[str] = "first-touch"
    at_least: ClassVar[dict[str, float]] = {"arrays": 1, "array_mib": 1, "pause": 0}
    arrays: int = 6  # arrays per round, all alive until the round ends
    array_mib: int = 1024  # MiB per array (np.full, as start-up's dummy video)
    pause: float = 20.0  # seconds idle before the third round


@dataclass(frozen=True, kw_only=True)
class SpawnCostSpec(ProbeSpec):
    """Start-up of LLMEngine(model) in this process (inproc) against two processes (mp): each run a
    fresh Python process, modes alternating after one untimed run of each (``warmup``: the file
    cache; ``warmup=False`` skips them)."""
    name: ClassVar[str] = "spawn-cost"
    at_least: ClassVar[dict[str, float]] = {"repeats": 1, "max_num_seqs": 1, "num_gpu_blocks": 1}
    model: str = "whisper-tiny"
    repeats: int = 3  # timed runs per mode
    max_num_seqs: int = 4
    num_gpu_blocks: int = 400
    warmup: bool = True  # one untimed run of each mode before the timed ones


@dataclass(frozen=True, kw_only=True)
class CacheHitSpec(ProbeSpec):
    """A ProcessingCache hit (a new dict and the tensors' version check, nothing copied) against a
    clone of every tensor on each hit, for one item of Qwen2.5-VL-3B's worst-case image shape."""
    name: ClassVar[str] = "cache-hit"
    at_least: ClassVar[dict[str, float]] = {"repeats": 1, "rows": 1}
    repeats: int = 15  # timed hits per way, after one untimed
    rows: int = 65536  # pixel_values rows of 1176 float32 (65536: 3584 x 3584, 308 MB)


@dataclass(frozen=True, kw_only=True)
class RegistryCallSpec(ProbeSpec):
    """Whisper's registry call alone (``get_encdec_max_encoder_len``, the call PRs #24866 / #24989
    moved off the step): its cost per call on one torch thread and on all of them, beside the bare HF
    ``WhisperProcessor`` call on the dummy audio it makes (issue 48, W2)."""
    name: ClassVar[str] = "registry-call"
    whisper: ClassVar[bool] = True
    at_least: ClassVar[dict[str, float]] = {"calls": 1, "threaded_calls": 1, "hf_calls": 1}
    model: str = "whisper-large-v3"
    calls: int = 300  # timed registry calls on one torch thread, after one untimed
    threaded_calls: int = 100  # timed registry calls on all the CPUs' torch threads
    hf_calls: int = 100  # timed bare HF processor calls (30 s of silence, as the dummy item)


@dataclass(frozen=True, kw_only=True)
class CrossAttentionReadSpec(ProbeSpec):
    """The two cross-attention reads of refimpl/attention/cross_attention.py on one decode step in
    isolation (whisper-tiny's shape by default): paged-runs on the paged cache, dense-once on each
    request's gathered copy, and the copy itself."""
    name: ClassVar[str] = "cross-attention-read"
    at_least: ClassVar[dict[str, float]] = {"batch": 1, "iters": 1, "encoder_len": 1, "heads": 1,
                                            "head_dim": 1, "block_size": 1}
    batch: int = 16  # requests of one query each
    iters: int = 30  # timed calls per read, after one untimed
    encoder_len: int = 1500  # keys per request
    heads: int = 6
    head_dim: int = 64
    block_size: int = 16


@dataclass(frozen=True, kw_only=True)
class CrossAttentionFragmentationSpec(ProbeSpec):
    """One long-running in-process engine per read (0.11.0, real weights) serving the same EOS
    workload ``runs`` times, reads alternating run by run: CPU s, requests/s and the key runs per
    request (maximal stretches of consecutive cache slots among its cross blocks)."""
    name: ClassVar[str] = "cross-attention-fragmentation"
    whisper: ClassVar[bool] = True
    at_least: ClassVar[dict[str, float]] = {"num_requests": 1, "runs": 1, "max_tokens": 1, "max_num_seqs": 1}
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"reads": READS}
    model: str = "whisper-tiny.en"
    num_requests: int = 48
    runs: int = 3  # runs per read
    max_tokens: int = 96
    max_num_seqs: int = 16
    reads: tuple[str, ...] = ("paged-runs", "dense-once")


@dataclass(frozen=True, kw_only=True)
class EngineVsGenerateSpec(ProbeSpec):
    """The engine (0.11.0) against transformers' static-batch generate() on the same requests in CPU
    seconds, after an untimed warm-up of each. In this process in ``order``; with ``trees``: each run a
    fresh process of each source tree (PYTHONPATH), trees A B B A by round, each alternating EH / HE."""
    name: ClassVar[str] = "engine-vs-generate"
    whisper: ClassVar[bool] = True
    at_least: ClassVar[dict[str, float]] = {"num_requests": 1, "max_num_seqs": 1, "max_tokens": 1,
                                            "warmup_requests": 0, "rounds": 1}
    model: str = "whisper-tiny.en"
    num_requests: int = 64
    max_num_seqs: int = 16
    max_tokens: int = 96
    warmup_requests: int = 4  # untimed requests each serves first
    order: str = "EHHE"  # in this process: E engine, H generate()
    trees: tuple[str, ...] = ()  # source trees to compare, e.g. /tmp/old . (each run a fresh process)
    rounds: int = 4  # with trees

    def check(self) -> None:
        super().check()
        if not self.order or set(self.order) - {"E", "H"}:
            raise ConfigError("order", "letters E (engine) and H (generate())", f"got {self.order!r}")
        for t in self.trees:
            if not (Path(t) / "refimpl" / "__init__.py").is_file():
                raise ConfigError("trees", "source trees holding refimpl/", f"no refimpl/ in {t!r}")
        if len({Path(t).resolve() for t in self.trees}) < len(self.trees):
            raise ConfigError("trees", "distinct source trees", f"got {' '.join(self.trees)}")


@dataclass(frozen=True, kw_only=True)
class StepOpsSpec(ProbeSpec):
    """Ops and host syncs per engine step (prefill, mixed, decode) against generate() per generated
    token, counted with a TorchDispatchMode (refimpl.lab.bench.step_ops.op_budget): counts, no timing."""
    name: ClassVar[str] = "step-ops"
    whisper: ClassVar[bool] = True
    at_least: ClassVar[dict[str, float]] = {"num_requests": 1, "max_tokens": 2}
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"cross_attention_read": READS}
    model: str = "whisper-tiny.en"
    num_requests: int = 16
    max_tokens: int = 24  # generate() runs at max(1, max_tokens // 3) and max_tokens
    cross_attention_read: str = "dense-once"


@dataclass(frozen=True, kw_only=True)
class ServingMemorySpec(ProbeSpec):
    """Peak host memory of an in-process Whisper engine serving ``max_num_seqs`` requests of 3 tokens,
    against the estimate of refimpl.lab.bench.guard.check_serving_memory (RSS sampled every 10 ms)."""
    name: ClassVar[str] = "serving-memory"
    whisper: ClassVar[bool] = True
    at_least: ClassVar[dict[str, float]] = {"max_num_seqs": 1, "num_gpu_blocks": 1}
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"scale": ("auto", "full", "small")}
    model: str = "whisper-large-v3"
    scale: str = "full"
    max_num_seqs: int = 8
    num_gpu_blocks: int = 400


@dataclass(frozen=True, kw_only=True)
class ExplorerReadySpec(ProbeSpec):
    """The explorer page's ready time as voila runs notebooks/00_explore.ipynb: a fresh kernel per load
    (cwd notebooks/, the tree on PYTHONPATH, one thread), default parameters, every code cell in order;
    ready = from the kernel answering (started, kernel_info replied) to the last cell's reply. With
    ``trees``: each load of each tree in turn (interleaved), this clone's when empty."""
    name: ClassVar[str] = "explorer-ready"
    at_least: ClassVar[dict[str, float]] = {"loads": 1, "cell_timeout": 1}
    loads: int = 3  # loads per tree
    trees: tuple[str, ...] = ()  # source trees to compare, e.g. /tmp/old . (default: this clone)
    cell_timeout: int = 600  # seconds one cell may take before the load fails

    def check(self) -> None:
        super().check()
        for t in self.trees:
            if not (Path(t) / "notebooks" / "00_explore.ipynb").is_file():
                raise ConfigError("trees", "source trees holding notebooks/00_explore.ipynb",
                                  f"no notebooks/00_explore.ipynb in {t!r}")
        if len({Path(t).resolve() for t in self.trees}) < len(self.trees):
            raise ConfigError("trees", "distinct source trees", f"got {' '.join(self.trees)}")


@dataclass(frozen=True, kw_only=True)
class EncoderBatchSpec(ProbeSpec):
    """Qwen2.5-VL's vision encoder (the small-scale model start-up runs) on frame pairs batched as a
    profile video, seconds per pair by batch size: each case ``SIDExPAIRS`` (a square frame of SIDE
    pixels, SIDE a multiple of 28; PAIRS frame pairs in one forward) timed ``draws`` times, the draws
    interleaved by case, on one torch thread (issue 43: which batch the calibration may time)."""
    name: ClassVar[str] = "encoder-batch"
    at_least: ClassVar[dict[str, float]] = {"draws": 1}
    model: str = "qwen2.5-vl-3b"  # a Qwen2.5-VL model refimpl ships (its small-scale encoder, random weights)
    # SIDExPAIRS: frame side in pixels (a multiple of 28) x frame pairs in one forward (3584: the 128k dummy's frame)
    cases: tuple[str, ...] = ("896x4", "896x7", "1792x4", "1792x7", "3584x1", "3584x2")  # the calibration's and the profile video's
    draws: int = 3  # timed forwards per case, after one untimed forward

    def pairs(self) -> list[tuple[int, int]]:
        """(side, pairs) of each case, in order."""
        return [(int(c.partition("x")[0]), int(c.partition("x")[2])) for c in self.cases]

    def check(self) -> None:
        """As ProbeSpec.check; then ``model`` a Qwen2.5-VL model (UnknownModelError naming them), each case
        ``SIDExPAIRS`` in ASCII digits without leading zeros, SIDE a multiple of 28, no case twice."""
        from refimpl.config import SUPPORTED_MODELS
        qwen = tuple(m for m in SUPPORTED_MODELS if m.startswith("qwen"))
        if isinstance(self.model, str) and self.model not in qwen:
            raise UnknownModelError("model", qwen, f"refimpl probe {self.name} encodes video, got {self.model!r}")
        super().check()
        if not self.cases:
            raise ConfigError("cases", "SIDExPAIRS, e.g. 1792x4", "got none")
        for c in self.cases:
            if not re.fullmatch(r"[1-9][0-9]*x[1-9][0-9]*", c) or int(c.partition("x")[0]) % 28:
                raise ConfigError("cases", "SIDExPAIRS: SIDE a multiple of 28, PAIRS >= 1 (e.g. 1792x4)", f"got {c!r}")
        twice = sorted({c for c in self.cases if self.cases.count(c) > 1})
        if twice:
            raise ConfigError("cases", "each case once", f"got {', '.join(twice)} more than once")
