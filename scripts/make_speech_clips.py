#!/usr/bin/env python3
"""Synthesise the short English speech clips committed under ``refimpl/data/speech/``.

One-off generation script; the WAVs it writes are committed, so nothing here is needed at
run time. It drives the espeak-ng shared library shipped by the PyPI package
``espeakng-loader`` (already a dependency in pyproject.toml) through ``ctypes``:
``espeak_Initialize`` (synchronous output), ``espeak_SetSynthCallback``,
``espeak_SetVoiceByName``, ``espeak_SetParameter`` (rate), ``espeak_Synth``. espeak-ng
produces 16-bit mono PCM at its native rate (22,050 Hz); the clip is resampled to 16 kHz with
an FFT (band-limited) resampler from numpy, peak-normalised to -3 dBFS and written as a
16 kHz mono int16 WAV with the stdlib ``wave`` module.

Tools used: numpy, espeakng-loader (libespeak-ng 1.52 + its data). No network, no new
dependency. Re-running gives the same clips up to the small random breath noise that
espeak-ng's female variants (``+f2``, ``+f3``) add, so those files are not byte-identical.

Usage::

    python scripts/make_speech_clips.py [--out refimpl/data/speech]

Raises RuntimeError if the library cannot be loaded or initialised, or a clip is empty or
longer than 10 s.
"""
from __future__ import annotations

import ctypes
import json
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro

TARGET_SR = 16_000
MAX_CLIP_S = 10.0

# (file stem, espeak voice, words per minute, text)
CLIPS: list[tuple[str, str, int, str]] = [
    ("clip0_weather", "en-us", 165,
     "The weather today will be mostly sunny, with a light breeze in the afternoon."),
    ("clip1_meeting", "en", 160,  # "en" = British English in espeak-ng
     "Please remember that the project meeting has moved to Thursday at ten o'clock."),
    ("clip2_numbers", "en-us+f3", 150,
     "Her phone number is four one five, five five five, two six eight one."),
    ("clip3_library", "en+m3", 170,
     "The library closes early on public holidays, so return your books by noon."),
    ("clip4_recipe", "en-us+m2", 155,
     "Mix two cups of flour with one egg, then bake the dough for twenty minutes."),
    ("clip5_train", "en-us+f2", 175,
     "The next train to the airport leaves from platform three in about five minutes."),
]

AUDIO_OUTPUT_SYNCHRONOUS = 2
ESPEAK_RATE = 1
POS_CHARACTER = 1
ESPEAK_CHARS_UTF8 = 1

_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.c_void_p)


class Espeak:
    """Minimal ctypes wrapper around libespeak-ng (synchronous synthesis into a buffer)."""

    def __init__(self):
        import espeakng_loader

        self.lib = ctypes.CDLL(espeakng_loader.get_library_path())
        self.lib.espeak_Initialize.restype = ctypes.c_int
        self.lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                                               ctypes.c_int]
        self.lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        self.lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self.lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint,
                                          ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
                                          ctypes.c_void_p, ctypes.c_void_p]
        data = espeakng_loader.get_data_path().encode()
        self.sample_rate = self.lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 500, data, 0)
        if self.sample_rate <= 0:
            raise RuntimeError(f"espeak_Initialize failed ({self.sample_rate})")
        self._chunks: list[np.ndarray] = []

        def _on_audio(wav, n, _events):
            if wav and n > 0:
                self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
            return 0  # 0 = continue synthesis

        self._cb = _CALLBACK(_on_audio)  # keep a reference: the library holds the pointer
        self.lib.espeak_SetSynthCallback(self._cb)

    def synth(self, text: str, voice: str, wpm: int) -> np.ndarray:
        """Synthesise ``text``; returns int16 samples at ``self.sample_rate`` Hz."""
        if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise RuntimeError(f"espeak voice {voice!r} not found")
        self.lib.espeak_SetParameter(ESPEAK_RATE, wpm, 0)
        self._chunks = []
        buf = ctypes.create_string_buffer(text.encode("utf-8"))
        rc = self.lib.espeak_Synth(buf, len(buf), 0, POS_CHARACTER, 0, ESPEAK_CHARS_UTF8,
                                   None, None)
        if rc != 0:
            raise RuntimeError(f"espeak_Synth failed ({rc}) for {text!r}")
        self.lib.espeak_Synchronize()
        if not self._chunks:
            raise RuntimeError(f"espeak produced no audio for {text!r}")
        return np.concatenate(self._chunks)


def resample_fft(x: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    """Band-limited resampling by FFT (as ``scipy.signal.resample``), float64 in and out.

    The signal is zero-padded by 0.1 s first so the circular FFT does not wrap the end onto
    the start.
    """
    pad = sr_in // 10
    xp = np.concatenate([x, np.zeros(pad)])
    n_out = int(round(len(xp) * sr_out / sr_in))
    spec = np.fft.rfft(xp)
    y = np.fft.irfft(spec[: n_out // 2 + 1], n=n_out) * (n_out / len(xp))
    return y[: int(round(len(x) * sr_out / sr_in))]


def trim_silence(x: np.ndarray, sr: int, thresh: float = 1e-3, keep_s: float = 0.1) -> np.ndarray:
    """Cut leading/trailing near-silence, keeping ``keep_s`` seconds of margin."""
    idx = np.flatnonzero(np.abs(x) > thresh * np.abs(x).max())
    keep = int(keep_s * sr)
    return x[max(idx[0] - keep, 0): idx[-1] + keep]


def write_wav(path: Path, x: np.ndarray, sr: int) -> None:
    """Write float samples in [-1, 1] as mono int16 PCM WAV."""
    pcm = np.clip(np.round(x * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm.tobytes())


@dataclass(frozen=True)
class ClipArgs:
    """Synthesise the short English speech clips committed under refimpl/data/speech/."""
    out: Annotated[Path, tyro.conf.arg(help="folder for the WAVs and clips.json", help_behavior_hint=(
        "(default: refimpl/data/speech)"))] = Path(__file__).resolve().parents[1] / "refimpl" / "data" / "speech"


def main(argv: list[str] | None = None) -> None:
    args = tyro.cli(ClipArgs, prog="scripts/make_speech_clips.py", args=argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    es = Espeak()
    manifest = []
    for stem, voice, wpm, text in CLIPS:
        raw = es.synth(text, voice, wpm).astype(np.float64) / 32768.0
        y = resample_fft(raw, es.sample_rate, TARGET_SR)
        y = trim_silence(y, TARGET_SR)
        y *= 10 ** (-3 / 20) / np.abs(y).max()  # peak -3 dBFS
        dur = len(y) / TARGET_SR
        if not 0 < dur <= MAX_CLIP_S:
            raise RuntimeError(f"{stem}: duration {dur:.2f} s out of (0, {MAX_CLIP_S}]")
        write_wav(out / f"{stem}.wav", y, TARGET_SR)
        manifest.append({"file": f"{stem}.wav", "voice": voice, "wpm": wpm, "text": text,
                         "duration_s": round(dur, 3), "sample_rate": TARGET_SR})
        print(f"{stem}.wav  {dur:5.2f} s  voice={voice} wpm={wpm}")
    (out / "clips.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"espeak-ng native rate {es.sample_rate} Hz -> {TARGET_SR} Hz; wrote {len(manifest)} "
          f"clips to {out}")


if __name__ == "__main__":
    main()
