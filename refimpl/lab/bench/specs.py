"""What each bench measures: frozen specs whose fields are the flags of ``refimpl bench`` (tyro)."""
from __future__ import annotations

import dataclasses
import json
import shlex
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Optional

import tyro

from refimpl.config.model import SUPPORTED_MODELS
from refimpl.variants import ENCODER_LEN_VARIANTS, STARTUP_VARIANTS

__all__ = ["HF", "LADDER", "Spec", "StartupSpec", "ServeSpec", "WerSpec", "CalibrateSpec", "DESIGNS",
           "CHOICES", "SPECS", "spec_from_params", "command_of", "parse_limits", "spec_to_json",
           "spec_from_json", "default"]

HF = "hf-generate"  # transformers' generate() in static batches: the serving benches' baseline
def default(text: str) -> Any:
    """A field's ``--help`` default, said in words where its value (None, empty) means something else."""
    return tyro.conf.arg(help_behavior_hint=f"(default: {text})")


LADDER = tuple(n for n, v in ENCODER_LEN_VARIANTS.items() if v.encoder_budget == "encoder-len")


class Spec:
    """Shared by the specs: ``name`` (the subcommand), ``bench`` (the Result's), ``labels``."""
    name: ClassVar[str]
    anchors: ClassVar[tuple[str, ...]] = ()  # fields the other defaults depend on
    model: Any
    variants: Any
    repeats: Any
    warmup: Any

    @property
    def bench(self) -> str:
        return self.name

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.variants)

    abba = False  # rounds A B B A (only whole rounds kept) rather than A B A B
    fresh = True  # each timed run a fresh process unless --in-process
    budget_s: Optional[float] = None

    def resolve(self) -> Any:
        """This spec with every default that depends on another field filled in."""
        return self

    def replace(self, **changes: Any) -> Any:
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def worker_env(self) -> dict[str, str]:
        return {}

    def params(self) -> dict[str, Any]:
        """The Result's ``params``: every (resolved) field; tuples as lists."""
        d = dataclasses.asdict(self.resolve())
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    def command(self, output_json: Optional[str] = None, in_process: bool = False) -> str:
        """The ``refimpl bench`` line that repeats this spec: its fields that differ from the defaults."""
        me, ref = self.resolve(), type(self)(**{k: getattr(self, k) for k in self.anchors}).resolve()
        out = ["refimpl", "bench", self.name]
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v, base = getattr(me, f.name), f.default if f.name in self.anchors else getattr(ref, f.name)
            if v == base or (f.name in self.anchors and v is None):
                continue
            flag = "--" + f.name.replace("_", "-")
            if isinstance(v, bool):
                out.append(flag if v else "--no-" + flag[2:])
            else:
                items = v if isinstance(v, tuple) else [x for kv in v.items() for x in kv] if isinstance(v, dict) else [v]
                out += [flag, *(shlex.quote(str(int(x) if isinstance(x, float) and x.is_integer() else x)) for x in items)]
        out += ["--output-json", shlex.quote(str(output_json))] if output_json else []
        return " ".join(out + (["--in-process"] if in_process and self.fresh else []))


@dataclass(frozen=True, kw_only=True)
class StartupSpec(Spec):
    """Engine start-up per phase and variant (vLLM PR #17935); --calls N: N successive
    compute_encoder_budget calls per process instead (the reviewer's experiment)."""
    name: ClassVar[str] = "startup"
    model: str = "qwen2.5-vl-3b"
    model_path: Annotated[Optional[str], default("the shipped config of --model")] = None  # local HF directory: config.json, preprocessor_config.json, weights
    variants: tuple[str, ...] = tuple(STARTUP_VARIANTS)[:2]  # measured side by side
    repeats: int = 3  # timed runs per variant, each a fresh process
    calls: Annotated[Optional[int], default("off: start-up per phase")] = None  # the budget experiment: calls per process
    max_model_len: Annotated[Optional[int], default("the model's")] = None  # tokens
    limit_mm_per_prompt: Annotated[dict[str, int], default("the model's")] = field(default_factory=dict)  # e.g. video 0
    mm_processor_kwargs: Annotated[dict[str, int], default("none")] = field(default_factory=dict)  # e.g. max_pixels 1003520
    process_mode: str = "inproc"  # inproc | mp (the engine core in a child process, as vLLM V1)
    reset_scope: str = "v0.9.0"  # mp: what reset_mm_cache clears in the child: v0.9.0 | all
    numpy_hugepage: str = "off"  # numpy's THP madvise in the measured processes: off | on
    device: str = "auto"  # auto | cpu | cuda
    warmup: bool = True  # one untimed run per variant first

    @property
    def bench(self) -> str:
        return "budget" if self.calls else "startup"

    def worker_env(self) -> dict[str, str]:
        return {"NUMPY_MADVISE_HUGEPAGE": "1" if self.numpy_hugepage == "on" else "0"}


DESIGNS: dict[str, tuple[str, dict[str, Any]]] = {  # design: (the Result's bench, defaults)
    "fresh": ("throughput", dict(model="whisper-tiny", variants=LADDER[-1:], repeats=3, num_requests=64,
                                 max_tokens=32, max_num_seqs=16, warmup_requests=4, device="auto")),
    "workload": ("workload", dict(model="whisper-tiny.en", variants=(LADDER[-1], HF), repeats=1,
                                  num_requests=64, max_tokens=96, max_num_seqs=16, warmup_requests=4,
                                  device="cpu")),
    "paired": ("paired", dict(model="whisper-tiny.en", variants=LADDER, repeats=30, num_requests=8,
                              max_tokens=16, max_num_seqs=8, num_gpu_blocks=2000, warmup_requests=0,
                              device="cpu")),
}


def per_design(key: str, fallback: str = "") -> Any:
    """``default`` for a ServeSpec field whose default depends on the design: each value of DESIGNS with
    the designs that take it."""
    by: dict[str, list[str]] = {}
    for design, (_, d) in DESIGNS.items():
        v = d.get(key)
        text = fallback if v is None else " ".join(map(str, v)) if isinstance(v, tuple) else str(v)
        by.setdefault(text, []).append(design)
    return default(", ".join(f"{v} ({', '.join(ds)})" for v, ds in by.items()))


@dataclass(frozen=True, kw_only=True)
class ServeSpec(Spec):
    """Whisper serving by encoder-length variant (vLLM PRs #24866 / #24989). Designs: fresh (a
    fresh process per run, A B A B, fixed output length), workload (this process, A B B A, EOS
    stops, latencies), paired (this process, identical blocks A B B A, gains with 95% CIs); the
    last two at a fixed concurrency C (``max_concurrency``) and output length L (``output_len``)."""
    name: ClassVar[str] = "serve"
    anchors: ClassVar[tuple[str, ...]] = ("design", "budget_s")
    design: str = "fresh"  # fresh | workload | paired
    model: Annotated[Optional[str], per_design("model")] = None
    variants: Annotated[Optional[tuple[str, ...]], per_design("variants")] = None  # encoder-length variants, audios-per-step@N, hf-generate
    repeats: Annotated[Optional[int], per_design("repeats")] = None  # runs per variant (paired: rounds)
    budget_s: Annotated[Optional[float], default("off: --repeats")] = None  # fixed time: a round starts only if it fits at the mean round
    against: str = "previous"  # paired: each gain over the previous | first variant
    num_requests: Annotated[Optional[int], per_design("num_requests")] = None  # per run (paired: per block)
    max_tokens: Annotated[Optional[int], per_design("max_tokens")] = None  # per request (fresh: exactly, ignore_eos)
    max_num_seqs: Annotated[Optional[int], per_design("max_num_seqs")] = None  # batch size (hf-generate: static batch)
    num_gpu_blocks: Annotated[Optional[int], per_design("num_gpu_blocks", "sized by the engine")] = None  # KV blocks
    warmup: bool = True  # one untimed run (paired: round) per variant first
    warmup_requests: Annotated[Optional[int], per_design("warmup_requests")] = None  # untimed requests each engine serves first
    rate: Annotated[Optional[float], default("all at 0 s")] = None  # workload: Poisson arrivals, requests/s
    max_concurrency: Annotated[Optional[int], default("off: arrivals")] = None  # workload, paired: closed loop, C in flight
    output_len: Annotated[Optional[int], default("off: --max-tokens")] = None  # workload, paired: exactly L tokens (ignore_eos)
    device: Annotated[Optional[str], per_design("device")] = None  # auto | cpu | cuda
    stop_half_width: Annotated[Optional[float], default("off: budget_s or repeats")] = None  # paired: stop once the first gain's 95% half-width (wall s, points) is at most this
    stop_min_pairs: int = 12  # paired: rounds each variant has run before stop_half_width is read

    @property
    def bench(self) -> str:
        return DESIGNS[self.design][0]

    @property
    def abba(self) -> bool:  # type: ignore[override]
        return self.design != "fresh"

    @property
    def fresh(self) -> bool:  # type: ignore[override]
        return self.design == "fresh"

    def resolve(self) -> ServeSpec:
        d = dict(DESIGNS[self.design][1], repeats=10**6 if self.budget_s else DESIGNS[self.design][1]["repeats"])
        d["max_tokens"] = self.output_len or d["max_tokens"]  # L tokens a request: --output-len is --max-tokens
        return dataclasses.replace(self, **{k: v for k, v in d.items() if getattr(self, k) is None})

    def params(self) -> dict[str, Any]:
        p = super().params()
        if self.design != "paired":
            p["engine"] = "hf" if p["variants"] == [HF] else "both" if HF in p["variants"] else "refimpl"
        if self.design == "workload":
            p["arrival"] = "poisson" if self.rate else "all"
        return p


@dataclass(frozen=True, kw_only=True)
class WerSpec(Spec):
    """Word error rate of the real whisper-tiny.en weights (transformers' generate()) on the
    shipped speech clips: the check behind every real-weight figure."""
    name: ClassVar[str] = "wer"
    max_new_tokens: int = 64  # cap per clip; EOS stops earlier
    model: str = field(default="whisper-tiny.en", init=False)
    repeats: int = field(default=1, init=False)
    warmup: bool = field(default=False, init=False)
    fresh = False

    @property
    def labels(self) -> tuple[str, ...]:
        return (self.model,)

    def params(self) -> dict[str, Any]:
        return {"model": self.model, "variants": [self.model], "max_new_tokens": self.max_new_tokens}


@dataclass(frozen=True, kw_only=True)
class CalibrateSpec(Spec):
    """The start-up cost model's rates on this machine (refimpl/lab/explore/cost_model.py): small
    arrays and a few small HF-processor calls, each run a fresh process; one run, goal 90 s on a quiet
    machine (72-73 s on the 2-core Intel VM, 2026-12-06; the dominant rates drawn three times inside it).
    Written to results/<hardware>/calibration.json unless --output-json says otherwise."""
    name: ClassVar[str] = "calibrate"
    models: tuple[str, ...] = SUPPORTED_MODELS  # processors, registry calls; fixed costs of each family's first
    repeats: int = 1  # fresh processes; the model reads their medians (2: a run-to-run spread, twice the time)
    size_mib: int = 128  # the arrays the rates are measured on (MiB); smaller ones overstate HF memory per element
    large_mib: int = 1024  # fill, copy and hash once more at this size (0: not); peaks near 4 x this
    warmup: bool = False  # one untimed process first

    @property
    def labels(self) -> tuple[str, ...]:
        return ("rates",)


CHOICES = {"process_mode": ("inproc", "mp"), "reset_scope": ("v0.9.0", "all"), "numpy_hugepage": ("off", "on"),
           "device": ("auto", "cpu", "cuda"), "design": tuple(DESIGNS), "against": ("previous", "first")}
SPECS: dict[str, type[Spec]] = {s.name: s for s in (StartupSpec, ServeSpec, WerSpec, CalibrateSpec)}


def _fields(cls: type, params: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in params.items() if k in names}


def spec_from_params(bench: str, params: dict[str, Any]) -> Spec:
    """The spec of a stored Result of ``bench`` (its ``params``), whatever its layout since schema 1."""
    if bench in ("startup", "budget", "wer", "calibrate"):
        cls = {"wer": WerSpec, "calibrate": CalibrateSpec}.get(bench, StartupSpec)
        return cls(**_fields(cls, {"calls": 2, **params} if bench == "budget" else params))
    p = dict(params, design={"throughput": "fresh"}.get(bench, bench))
    n = p.get("max_audios_per_step", 1)
    p["variants"] = [f"{v}@{n}" if n > 1 and v in ENCODER_LEN_VARIANTS and ENCODER_LEN_VARIANTS[v].encoder_batch
                     else v for v in p["variants"]]
    if bench == "workload" and p.get("arrival") == "all":
        p["rate"] = None
    if bench == "paired" and "block_requests" in p:  # the layout before serve
        p.update(num_requests=p["block_requests"], repeats=p.get("rounds"), warmup=p.get("warmup_rounds", 1) > 0,
                 budget_s=p.get("budget_s") or p.get("max_benchmark_s"))
    return ServeSpec(**_fields(ServeSpec, p))


def command_of(bench: str, params: dict[str, Any], *, in_process: bool = False,
               output_json: Optional[str] = None) -> str:
    return spec_from_params(bench, params).command(output_json, in_process)


def parse_limits(items: list[str]) -> dict[str, int]:
    """``["video=0", "image=2"]`` -> ``{"video": 0, "image": 2}``."""
    return {k: int(v) for k, _, v in (it.partition("=") for it in items)}


def spec_to_json(spec: Spec) -> str:
    return json.dumps({"bench": spec.name, "spec": dataclasses.asdict(spec)})  # type: ignore[call-overload]


def spec_from_json(text: str) -> Spec:
    d = json.loads(text)
    cls = SPECS[d["bench"]]
    return cls(**_fields(cls, d["spec"]))
