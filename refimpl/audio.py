"""Real speech for the Whisper benchmarks: the espeak-ng clips of ``refimpl/data/speech/``
(16 kHz mono int16 WAV; scripts/make_speech_clips.py) and request audio of varied length built
from them.
"""
from __future__ import annotations

import wave
from functools import lru_cache
from importlib import resources

import numpy as np

SAMPLE_RATE = 16_000  # Hz, Whisper's feature-extractor rate
WHISPER_WINDOW_S = 30.0  # seconds, Whisper's chunk_length


@lru_cache(maxsize=1)
def _load_clips() -> tuple[tuple[str, np.ndarray], ...]:
    folder = resources.files("refimpl").joinpath("data", "speech")
    clips = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".wav"):
            continue
        with entry.open("rb") as f, wave.open(f, "rb") as w:
            if (w.getnchannels(), w.getsampwidth(), w.getframerate()) != (1, 2, SAMPLE_RATE):
                raise ValueError(f"{entry.name}: expected 16 kHz mono int16 PCM, got "
                                 f"{w.getnchannels()} ch, {8 * w.getsampwidth()} bit, "
                                 f"{w.getframerate()} Hz")
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        audio = (pcm.astype(np.float32) / 32768.0)
        audio.setflags(write=False)
        clips.append((entry.name[:-4], audio))
    if not clips:
        raise FileNotFoundError(f"no .wav clips under {folder}")
    return tuple(clips)


def load_speech_clips() -> list[tuple[str, np.ndarray]]:
    """The shipped clips as ``(name, samples)``, sorted: 1-D float32 in [-1, 1) at 16 kHz, read once
    and shared (copy before editing). Raises FileNotFoundError (none), ValueError (not 16 kHz mono int16)."""
    return list(_load_clips())


def make_request_audios(n: int, seed: int, max_s: float = WHISPER_WINDOW_S,
                        min_s: float = 1.0, gap_s: float = 0.25) -> list[np.ndarray]:
    """``n`` float32 16 kHz audios, deterministic per arguments: each a length drawn from [``min_s``,
    ``max_s``] s, filled with random clips and ``gap_s`` s of silence, trimmed to it. Raises
    ValueError if ``n < 0``, ``gap_s < 0`` or not ``0 < min_s <= max_s``."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0 < min_s <= max_s:
        raise ValueError(f"need 0 < min_s <= max_s, got min_s={min_s}, max_s={max_s}")
    if gap_s < 0:
        raise ValueError(f"gap_s must be >= 0, got {gap_s}")
    clips = [a for _, a in _load_clips()]
    rng = np.random.default_rng(seed)
    gap = np.zeros(int(gap_s * SAMPLE_RATE), dtype=np.float32)
    max_len = int(max_s * SAMPLE_RATE)
    out = []
    for _ in range(n):
        target = min(max(int(rng.uniform(min_s, max_s) * SAMPLE_RATE), 1), max_len)
        parts: list[np.ndarray] = []
        total = 0
        while total < target:
            clip = clips[int(rng.integers(len(clips)))]
            if parts:
                parts.append(gap)
                total += len(gap)
            parts.append(clip)
            total += len(clip)
        out.append(np.concatenate(parts)[:target].astype(np.float32, copy=True))
    return out
