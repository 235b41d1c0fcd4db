"""The study's rows: released vLLM behaviours, one-change rows and ours, each a named record.

A release row (``"0.9.0"``) behaves as that release did, switch by switch (the release where a
switch changed is beside the field; docs/mechanisms/ has a page per change); a one-change row
(``"0.9.0+#19484"``) adds one PR to a release; ``refimpl``, ``shape-only`` and
``audios-per-step`` are ours. ``LEGACY_NAMES``: the 0.1.0 names, accepted with a
DeprecationWarning until 0.3.0 (``current_row_name``), and labels of older results. Raises
UnknownVariantError naming the choices for an unknown name. This module holds the start-up rows;
the encoder-length rows are in refimpl.encoder_len_variants and the old names in
refimpl.variant_names, every name of both importable from here.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, Optional

from refimpl.encoder_len_variants import (  # noqa: F401 - the names this module held before the split
    ENCODER_LEN_SITES,
    ENCODER_LEN_VARIANTS,
    EncoderLenSite,
    EncoderLenSource,
    EncoderLenVariant,
    get_encoder_len_variant,
)
from refimpl.errors import UnknownVariantError
from refimpl.variant_names import (  # noqa: F401 - the names this module held before the split
    LEGACY_NAMES,
    SHAPE_ONLY_BEFORE_0_2,
    current_row_name,
    legacy_name,
)

WorstCaseImage = Literal["square", "factor-pair", "true-max"]
HashBytePath = Literal["v0.8.5", "v0.9.0", "v0.9.2", "stream"]
_CHOICES = {"dummy_video_dtype": ("int64", "uint8"), "dummy_audio_dtype": ("float64", "float32"),
            "hash_byte_path": ("v0.8.5", "v0.9.0", "v0.9.2", "stream"),
            "oversize_item": ("raise", "skip"), "worst_case_image": ("square", "factor-pair", "true-max"),
            "frame_fit": ("minus-images", "whole-seq"), "frame_share": ("vllm", "whole-patches")}


@dataclass(frozen=True)
class MultiModalSwitches:
    """The processing mechanics of one version, read by the processors (defaults: ``refimpl``).

    dummy_video_dtype  int64 (``np.full(shape, 255)``) to 0.11.0; uint8 from 0.11.1.
    dummy_audio_dtype  float64 (``np.zeros``, kept as float64) in every release read; float32 ours.
    hash_byte_path     copies per hash: v0.8.5 1, v0.9.0 3, v0.9.2 (#19484) 2, stream (#24925,
                       0.11.0) none; see multimodal/hasher.py.
    hash_uncached      items hashed even with no cache (from 0.10.2).
    oversize_item      raise: cachetools' "value too large" (every release read); skip (#53016).
    shape_only         ours: the profile run's inputs at their processed shape, no HF pass.
    worst_case_image   square to 0.12; factor-pair (#29692, 0.13.0); true-max ours.
    max_frames_per_video  16, 14 from 0.11.0; None ours.
    frame_fit          minus-images: image tokens leave ``seq_len`` first (to 0.10.1); whole-seq.
    frame_share        several videos: vllm, each the floor of the frames over the videos (every
                       release read; odd shares padded by the HF processor); whole-patches ours,
                       rounded down to a multiple of temporal_patch_size.
    Raises UnknownVariantError (a ConfigError) on a bad value."""
    dummy_video_dtype: Literal["int64", "uint8"] = "uint8"
    dummy_audio_dtype: Literal["float64", "float32"] = "float32"
    hash_byte_path: HashBytePath = "stream"
    hash_uncached: bool = False
    oversize_item: Literal["raise", "skip"] = "skip"
    shape_only: bool = False
    worst_case_image: WorstCaseImage = "true-max"
    max_frames_per_video: Optional[int] = None
    frame_fit: Literal["minus-images", "whole-seq"] = "whole-seq"
    frame_share: Literal["vllm", "whole-patches"] = "whole-patches"

    def __post_init__(self):
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise UnknownVariantError(f"mm_switches.{name}", allowed, f"got {getattr(self, name)!r}")
        if self.max_frames_per_video is not None and self.max_frames_per_video < 1:
            raise UnknownVariantError("mm_switches.max_frames_per_video", ">= 1 or None",
                                      f"got {self.max_frames_per_video}")


@dataclass(frozen=True)
class StartupVariant:
    """One start-up behaviour of the multimodal engine (``release`` None: one-change rows and ours).

    profiling_cache    off: no profiling pass uses a cache (0.8.5); registry: every pass uses the
                       process's cache even when the user turned it off (#17935, 0.9.0 to 0.10.0);
                       runner: the runner's own, absent when turned off, the scheduler's lookup
                       uncached (0.10.2 on).
    formula_models     families whose max tokens per item come from a formula: Qwen2/2.5-VL from
                       0.9.2 (#19756); Whisper in no release read.
    reset_at_end       ``reset_mm_cache()`` at the end of start-up (#17935, 0.9.0).
    reset_scope        v0.9.0: the engine core keeps its profiling cache (to 0.11.0); all (0.11.1).
    profile_run_lookup profile_run looks the max tokens up again (until 0.10.0).
    profile_seq_len    the profile dummy at max_num_batched_tokens (to 0.10.2), max_model_len
                       (#25553, 0.11.0) or the per-item maximum (ours).
    profile_items      encoder-batch items: cdiv(budget, per item) to 0.9.2; floor from 0.10.0.
    stop_check         serving's ``check_stop`` order (SchedulerConfig.stop_check, set by EngineCore):
                       caps-first, max_tokens / max_model_len before the last token's EOS or stop
                       id (0.8.5 to 0.11.0); stop-first (PR #26317, 0.11.1 on).
    ``mm``: the processing mechanics (MultiModalSwitches)."""
    name: str
    reproduces: str
    release: Optional[str]
    profiling_cache: Literal["off", "registry", "runner"]
    formula_models: tuple[str, ...]
    reset_at_end: bool
    reset_scope: Literal["v0.9.0", "all"]
    profile_run_lookup: bool
    profile_seq_len: Literal["max_num_batched_tokens", "max_model_len", "per-item-max"]
    profile_items: Literal["cdiv", "floor"]
    mm: MultiModalSwitches
    stop_check: Literal["stop-first", "caps-first"] = "stop-first"

    @property
    def mm_switches(self) -> MultiModalSwitches:
        return self.mm

    @property
    def cache_during_profiling(self) -> bool:
        """Whether the profiling passes may use a processing cache at all."""
        return self.profiling_cache != "off"

    def uses_formula(self, model: str) -> bool:
        """Whether ``model``'s max tokens per item come from its formula under this row."""
        return any(model.startswith(f) for f in self.formula_models)


def _row(base: StartupVariant, name: str, reproduces: str, release: Optional[str] = None, *,
         mm: Optional[dict] = None, **fields) -> StartupVariant:
    """``base`` with ``fields`` and the processing switches ``mm`` changed."""
    return replace(base, name=name, reproduces=reproduces, release=release,
                   mm=replace(base.mm, **(mm or {})), **fields)


_V085 = StartupVariant(
    "0.8.5", "vLLM 0.8.5 (before PR #17935)", "0.8.5", profiling_cache="off", formula_models=(),
    reset_at_end=False, reset_scope="v0.9.0", profile_run_lookup=True,
    profile_seq_len="max_num_batched_tokens", profile_items="cdiv", stop_check="caps-first",
    mm=MultiModalSwitches(dummy_video_dtype="int64", dummy_audio_dtype="float64",
                          hash_byte_path="v0.8.5", oversize_item="raise", worst_case_image="square",
                          max_frames_per_video=16, frame_fit="minus-images", frame_share="vllm"))
_V090 = _row(_V085, "0.9.0", "vLLM 0.9.0 (PR #17935: cache on during profiling, reset at the end)",
             "0.9.0", profiling_cache="registry", reset_at_end=True, mm=dict(hash_byte_path="v0.9.0"))
_V092 = _row(_V090, "0.9.2", "vLLM 0.9.2 (PR #19484 hasher without tobytes, PR #19756 Qwen2/2.5-VL "
             "formula)", "0.9.2", formula_models=("qwen2",), mm=dict(hash_byte_path="v0.9.2"))
_V0102 = _row(_V092, "0.10.2", "vLLM 0.10.2 (frames fitted to the whole seq_len; the runner's own "
              "profiling cache, honouring a disabled cache)", "0.10.2", profiling_cache="runner",
              profile_run_lookup=False, profile_items="floor",
              mm=dict(frame_fit="whole-seq", hash_uncached=True))
_V0110 = _row(_V0102, "0.11.0", "vLLM 0.11.0 (PR #24925 streaming hasher, 14 frames, PR #25553 "
              "profile dummy at max_model_len)", "0.11.0", profile_seq_len="max_model_len",
              mm=dict(hash_byte_path="stream", max_frames_per_video=14))
_V0111 = _row(_V0110, "0.11.1", "vLLM 0.11.1 (uint8 dummy video; reset clears the engine core's "
              "profiling cache; PR #26317 check_stop: stop tokens before the length caps)", "0.11.1", reset_scope="all",
              stop_check="stop-first", mm=dict(dummy_video_dtype="uint8"))
_V0130 = _row(_V0111, "0.13.0", "vLLM 0.13.0 (PR #29692: worst-case image from the closest factor "
              "pair)", "0.13.0", mm=dict(worst_case_image="factor-pair"))
_OURS = _row(_V0130, "refimpl", "ours, the kit's default: vLLM 0.13.0 plus the true worst-case "
             "image, no frame cap, the profile dummy at the per-item maximum, oversize items "
             "skipped, float32 dummy audio, Whisper's formula", formula_models=("qwen2", "whisper"),
             profile_seq_len="per-item-max",
             mm=dict(worst_case_image="true-max", max_frames_per_video=None, oversize_item="skip",
                     dummy_audio_dtype="float32", hash_uncached=False, frame_share="whole-patches"))
# The old ladder's cumulative rows, kept so its results stay labelled and re-runnable.
_OLD = _row(_V090, "0.9.0+#24925+uint8", "the old ladder's uint8-video: vLLM 0.9.0 + PR #24925 + "
            "the uint8 dummy video", mm=dict(hash_byte_path="stream", dummy_video_dtype="uint8"))
_OLD_F = _row(_OLD, "0.9.0+#19756+#24925+uint8", "the old ladder's formula: those + PR #19756 "
              "(oversize items skipped)", formula_models=("qwen2", "whisper"), mm=dict(oversize_item="skip"))

# Ladder order: releases, then ours; the one-change rows on top of 0.9.0; the old ladder's.
STARTUP_VARIANTS: dict[str, StartupVariant] = {v.name: v for v in (
    _V085, _V090, _V092, _V0102, _V0110, _V0111, _V0130, _OURS,
    _row(_OURS, "shape-only", "ours: the kit's default with the profile run's inputs built at "
         "their processed shape, no HF pass", mm=dict(shape_only=True)),
    _row(_V090, "0.9.0+#19484", "vLLM 0.9.0 + PR #19484 (the hasher reads the array's buffer, 2 "
         "copies instead of 3)", mm=dict(hash_byte_path="v0.9.2")),
    _row(_V090, "0.9.0+#24925", "vLLM 0.9.0 + PR #24925 (the streaming hasher, no copy)",
         mm=dict(hash_byte_path="stream")),
    _row(_V090, "0.9.0+uint8", "vLLM 0.9.0 + the uint8 dummy video of 0.11.1",
         mm=dict(dummy_video_dtype="uint8")),
    _row(_V090, "0.9.0+#19756", "vLLM 0.9.0 + PR #19756 (Qwen2/2.5-VL max tokens per item by "
         "formula)", formula_models=("qwen2",)),
    _OLD, _OLD_F,
    _row(_OLD_F, "0.9.0+#19756+#24925+uint8+shape-only", "the old ladder's shape-only: those + ours, "
         "the dummy still at max_num_batched_tokens", mm=dict(shape_only=True)),
)}
RELEASE_ROWS = tuple(n for n, v in STARTUP_VARIANTS.items() if v.release)
LADDER = (*RELEASE_ROWS, "refimpl", "shape-only")  # the start-up study's default rows


def get_startup_variant(name: str) -> StartupVariant:
    """The record named ``name`` (an old name: its row, with a DeprecationWarning). Raises
    UnknownVariantError naming the choices."""
    if not isinstance(name, str):
        raise UnknownVariantError("variant", tuple(STARTUP_VARIANTS), f"a row's name, got {name!r}")
    if name not in STARTUP_VARIANTS and name.partition("@")[0] in LEGACY_NAMES:
        name = current_row_name(name, stacklevel=3)
    if name not in STARTUP_VARIANTS:
        raise UnknownVariantError("variant", tuple(STARTUP_VARIANTS), f"unknown variant {name!r}")
    return STARTUP_VARIANTS[name]
