"""The start-up cost model's rates as one typed, frozen record: what ``refimpl bench calibrate``
measures (refimpl/lab/bench/calibrate.py) and ``cost_model.predict`` reads. A calibration Result
stores them flat, one dotted key per rate (schema_version 2, ``Rates.to_flat``); ``Rates.from_flat``
reads any of them, older ones without the size-dependent (``large.*``) and per-pair encoder rates.
Units: seconds (``_s``), seconds per GiB / megapixel / token / item, bytes, bytes per byte or element.
No vLLM counterpart."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Optional, TypeVar

from refimpl.config import SUPPORTED_MODELS

__all__ = ["GiB", "VIDEO_DTYPES", "SizedRate", "ModelRates", "Rates", "need"]
GiB = 1 << 30
VIDEO_DTYPES = ("uint8", "int64")  # the dummy video's dtypes the HF and fill rates are keyed by
T = TypeVar("T")


def _between(x: float, lo: float, hi: float) -> float:
    """Where ``x`` lies from ``lo`` (0) to ``hi`` (1), linear in log2, held at both ends."""
    if hi <= lo:
        return 1.0 if x >= hi else 0.0
    return min(1.0, max(0.0, math.log2(max(x, 1e-12) / lo) / math.log2(hi / lo)))


def need(table: dict[str, T], key: str, what: str) -> T:
    """``table[key]``, else KeyError naming the calibration's rate ``<what>.<key>``."""
    if key not in table:
        raise KeyError(f"the calibration has no rate {what}.{key}: rerun refimpl bench calibrate")
    return table[key]


@dataclass(frozen=True)
class SizedRate:
    """A rate (s/GiB) measured on arrays of ``Rates.size_gib`` and, where calibrated, ``Rates.large_gib``."""
    small: float
    large: Optional[float] = None

    def at(self, nbytes: float, small_gib: float, large_gib: Optional[float]) -> float:
        """``small`` up to ``small_gib``, ``large`` from ``large_gib`` on, linear in log2(size) between."""
        if self.large is None or large_gib is None:
            return self.small
        x = _between(max(nbytes, 1) / GiB, small_gib, large_gib)
        return self.small + x * (self.large - self.small)


@dataclass(frozen=True)
class ModelRates:
    """One model's rates; None where the calibration did not measure it (fixed costs are measured
    for the first model of each family only: ``Rates.model`` falls back to it)."""
    import_s: Optional[float] = None  # first_use.import_s.<m>
    processor_build_s: Optional[float] = None  # first_use.processor_build_s.<m>
    weights_rss: Optional[float] = None  # rss.model.<m> (bytes)
    hf_text_only_s: Optional[float] = None  # hf.text_only_s.<m> (Whisper)
    hf_audio_s_per_item: Optional[float] = None  # hf.audio_s_per_item.<m>
    runner_s: Optional[float] = None  # model.<m>.<field> from here on
    load_s: Optional[float] = None
    dummy_run_s: Optional[float] = None
    dummy_run_peak: Optional[float] = None
    kv_s_per_gib: Optional[float] = None
    kv_rss_per_byte: Optional[float] = None
    registry_call_s: Optional[float] = None
    encoder_s_per_item: Optional[float] = None
    encoder_peak_per_item: Optional[float] = None
    encoder_exponent: Optional[float] = None
    encoder_s_at_tokens: Optional[float] = None
    encoder_tokens: Optional[float] = None
    encoder_peak_per_token: Optional[float] = None
    encoder_pair_s_per_token: Optional[float] = None
    encoder_pair_s_per_token2: Optional[float] = None
    encoder_pair_s: Optional[float] = None  # seconds per frame pair (c of c + a t + b t^2; none before issue 43: 0)
    encoder_pair_peak_per_token: Optional[float] = None  # bytes per token, one pair of encoder_pair_peak_tokens
    encoder_pair_peak_tokens: Optional[float] = None


_OUTSIDE = {"import_s": "first_use.import_s.{m}", "processor_build_s": "first_use.processor_build_s.{m}",
            "weights_rss": "rss.model.{m}", "hf_text_only_s": "hf.text_only_s.{m}",
            "hf_audio_s_per_item": "hf.audio_s_per_item.{m}"}
_MODEL_FIELDS = tuple(f.name for f in fields(ModelRates))


def _model_key(name: str, m: str) -> str:
    return _OUTSIDE[name].format(m=m) if name in _OUTSIDE else f"model.{m}.{name}"


@dataclass(frozen=True)
class Rates:
    """Every rate of one calibration. Keys of the dict fields: ``fill_s_per_gib`` by dtype (and
    ``pil``), ``hash_s_per_gib`` / ``hash_peak`` by ``<byte path>.<ndarray|image>``, the HF video
    rates by dtype, ``models`` by model name."""
    rss_base: float
    rss_imports: float = 0.0
    size_gib: float = 0.125
    large_gib: Optional[float] = None
    fill_s_per_gib: dict[str, SizedRate] = field(default_factory=dict)
    hash_s_per_gib: dict[str, SizedRate] = field(default_factory=dict)
    hash_peak: dict[str, float] = field(default_factory=dict)
    copy_s_per_gib: SizedRate = SizedRate(0.0)
    free_s_per_gib: float = 0.0
    hf_text_only_s: Optional[float] = None
    hf_image_s_per_mp: Optional[float] = None
    hf_image_peak_per_pixel: Optional[float] = None
    hf_video_in_s_per_mp: dict[str, float] = field(default_factory=dict)
    hf_video_out_s_per_mp: dict[str, float] = field(default_factory=dict)
    hf_video_peak_per_element: dict[str, float] = field(default_factory=dict)  # per input element
    hf_video_peak_per_out_element: dict[str, float] = field(default_factory=dict)  # per padded output element
    hf_video_frame_mp: Optional[float] = None  # the small video frames' MP (hf.video_frame_mp)
    hf_image_mp: Optional[float] = None  # the small image's MP (hf.image_mp)
    hf_large_frame_mp: Optional[float] = None  # the dummy's full-size frame (large.hf.frame_mp)
    hf_large_image_s_per_mp: Optional[float] = None  # an image of that size (large.hf.image_s_per_mp)
    hf_large_video_s_per_mp: dict[str, float] = field(default_factory=dict)  # a frame pair of it, per dtype
    models: dict[str, ModelRates] = field(default_factory=dict)

    def sized(self, rate: SizedRate, nbytes: float) -> float:
        """``rate`` for an array of ``nbytes`` (SizedRate.at with this calibration's sizes)."""
        return rate.at(nbytes, self.size_gib, self.large_gib)

    def hf_video_s(self, dtype: str, frames: int, in_mp: float, out_mp: float) -> float:
        """Seconds of the HF processor on a video of ``frames`` frames (``in_mp`` input, ``out_mp``
        padded output frame-MP): the small frames' in/out rates up to ``hf_video_frame_mp`` per frame,
        input frame-MP x the full-size pair's rate from ``hf_large_frame_mp`` on (a frame padded to
        the pair costs little at full size), linear in log2(frame MP) between (KeyError naming the rate a calibration lacks)."""
        small = in_mp * need(self.hf_video_in_s_per_mp, dtype, "hf.video_in_s_per_mp") \
            + out_mp * need(self.hf_video_out_s_per_mp, dtype, "hf.video_out_s_per_mp")
        return self._by_frame(small, in_mp, in_mp / max(frames, 1), self.hf_video_frame_mp,
                              self.hf_large_video_s_per_mp.get(dtype))

    def hf_image_s(self, in_mp: float) -> float:
        """Seconds of the HF processor on an image of ``in_mp`` MP (as ``hf_video_s``, by its MP)."""
        if self.hf_image_s_per_mp is None:
            raise KeyError("the calibration has no rate hf.image_s_per_mp: rerun refimpl bench calibrate")
        return self._by_frame(in_mp * self.hf_image_s_per_mp, in_mp, in_mp, self.hf_image_mp,
                              self.hf_large_image_s_per_mp)

    def _by_frame(self, small_s: float, in_mp: float, frame_mp: float, small_frame_mp: Optional[float],
                  large_rate: Optional[float]) -> float:
        """``small_s`` up to ``small_frame_mp`` a frame, ``in_mp`` x ``large_rate`` from the full-size
        frame on, linear in log2(frame MP) between; ``small_s`` where either size or rate is missing."""
        if large_rate is None or not small_frame_mp or not self.hf_large_frame_mp:
            return small_s
        x = _between(frame_mp, small_frame_mp, self.hf_large_frame_mp)
        return (1 - x) * small_s + x * in_mp * large_rate

    def model_or_none(self, model: str, name: str) -> Optional[float]:
        """``name`` (a ModelRates field) of ``model``, else of the calibrated model of its family
        (whisper-tiny for whisper-large-v3), else None."""
        family = model.split("-")[0]
        for m in (model, *(m for m in SUPPORTED_MODELS if m.split("-")[0] == family)):
            x = getattr(self.models.get(m, ModelRates()), name)
            if x is not None:
                return x
        return None

    def model(self, model: str, name: str, fallback: Optional[float] = None) -> float:
        """``model_or_none``, else ``fallback``; KeyError naming the stored key when neither is."""
        x = self.model_or_none(model, name)
        if x is None:
            x = fallback
        if x is None:
            raise KeyError(f"the calibration has no rate {_model_key(name, model)!r}: rerun refimpl bench calibrate")
        return x

    @classmethod
    def from_flat(cls, flat: dict[str, float]) -> "Rates":
        """The record of a calibration's dotted keys (schema_version 2, any age). Raises KeyError
        naming a key it does not know."""
        kw: dict = {"fill_s_per_gib": {}, "hash_s_per_gib": {}, "hash_peak": {}, "hf_video_in_s_per_mp": {},
                    "hf_video_out_s_per_mp": {}, "hf_video_peak_per_element": {}, "hf_video_peak_per_out_element": {},
                    "hf_large_video_s_per_mp": {}}
        models: dict[str, dict[str, float]] = {}
        large = {k[len("large."):]: v for k, v in flat.items() if k.startswith("large.") and k != "large.gib"}
        scalars = {"rss.base": "rss_base", "rss.imports": "rss_imports", "size_gib": "size_gib",
                   "large.gib": "large_gib", "free_s_per_gib": "free_s_per_gib", "hf.text_only_s": "hf_text_only_s",
                   "hf.image_s_per_mp": "hf_image_s_per_mp", "hf.image_peak_per_pixel": "hf_image_peak_per_pixel",
                   "hf.video_frame_mp": "hf_video_frame_mp", "hf.image_mp": "hf_image_mp",
                   "large.hf.frame_mp": "hf_large_frame_mp", "large.hf.image_s_per_mp": "hf_large_image_s_per_mp"}
        outside = {pattern.split("{")[0]: name for name, pattern in _OUTSIDE.items()}
        for k, v in flat.items():
            head, _, rest = k.partition(".")
            if k in scalars:
                kw[scalars[k]] = v
            elif k.startswith("large.hf.video_s_per_mp."):
                kw["hf_large_video_s_per_mp"][k.rsplit(".", 1)[1]] = v
            elif k.startswith("large."):
                continue
            elif k == "copy_s_per_gib":
                kw["copy_s_per_gib"] = SizedRate(v, large.get(k))
            elif head in ("fill_s_per_gib", "hash_s_per_gib"):
                kw[head][rest] = SizedRate(v, large.get(k))
            elif head == "hash_peak":
                kw["hash_peak"][rest] = v
            elif head == "hf" and rest.split(".")[0] in ("video_in_s_per_mp", "video_out_s_per_mp",
                                                          "video_peak_per_element", "video_peak_per_out_element"):
                name, _, dtype = rest.partition(".")
                kw[f"hf_{name}"][dtype] = v
            elif any(k.startswith(p) for p in outside):
                prefix = next(p for p in outside if k.startswith(p))
                models.setdefault(k[len(prefix):], {})[outside[prefix]] = v
            elif head == "model" and rest.rsplit(".", 1)[-1] in _MODEL_FIELDS:
                m, _, name = rest.rpartition(".")
                models.setdefault(m, {})[name] = v
            else:
                raise KeyError(f"unknown calibration rate {k!r}")
        return cls(**kw, models={m: ModelRates(**r) for m, r in models.items()})

    def to_flat(self) -> dict[str, float]:
        """The dotted keys a calibration Result stores (``from_flat``'s inverse)."""
        out: dict[str, float] = {"rss.base": self.rss_base, "rss.imports": self.rss_imports,
                                 "size_gib": self.size_gib, "free_s_per_gib": self.free_s_per_gib}
        if self.large_gib is not None:
            out["large.gib"] = self.large_gib
        sized = {"copy_s_per_gib": self.copy_s_per_gib,
                 **{f"fill_s_per_gib.{k}": r for k, r in self.fill_s_per_gib.items()},
                 **{f"hash_s_per_gib.{k}": r for k, r in self.hash_s_per_gib.items()}}
        for k, r in sized.items():
            out[k] = r.small
            if r.large is not None:
                out[f"large.{k}"] = r.large
        out |= {f"hash_peak.{k}": v for k, v in self.hash_peak.items()}
        for name in ("hf_text_only_s", "hf_image_s_per_mp", "hf_image_peak_per_pixel", "hf_video_frame_mp",
                     "hf_image_mp"):
            if getattr(self, name) is not None:
                out["hf." + name[3:]] = getattr(self, name)
        for key, x in (("frame_mp", self.hf_large_frame_mp), ("image_s_per_mp", self.hf_large_image_s_per_mp)):
            if x is not None:
                out[f"large.hf.{key}"] = x
        out |= {f"large.hf.video_s_per_mp.{d}": v for d, v in self.hf_large_video_s_per_mp.items()}
        for name in ("video_in_s_per_mp", "video_out_s_per_mp", "video_peak_per_element", "video_peak_per_out_element"):
            out |= {f"hf.{name}.{d}": v for d, v in getattr(self, f"hf_{name}").items()}
        for m, mr in self.models.items():
            out |= {_model_key(n, m): getattr(mr, n) for n in _MODEL_FIELDS if getattr(mr, n) is not None}
        return out
