"""refimpl.audio: the shipped speech clips and the request audios built from them."""
import json
from importlib import resources

import numpy as np
import pytest

from refimpl.audio import SAMPLE_RATE, load_speech_clips, make_request_audios


def test_clips_are_short_16k_mono_speech():
    clips = load_speech_clips()
    assert len(clips) >= 3
    names = [n for n, _ in clips]
    assert names == sorted(names)
    for name, a in clips:
        assert a.dtype == np.float32 and a.ndim == 1
        assert 0.5 * SAMPLE_RATE < len(a) < 10 * SAMPLE_RATE, name
        assert np.abs(a).max() <= 1.0
        assert np.sqrt(np.mean(a ** 2)) > 0.01, f"{name} is (nearly) silent"


def test_clips_json_matches_files():
    folder = resources.files("refimpl").joinpath("data", "speech")
    manifest = json.loads(folder.joinpath("clips.json").read_text())
    clips = dict(load_speech_clips())
    assert sorted(m["file"][:-4] for m in manifest) == sorted(clips)
    for m in manifest:
        assert m["sample_rate"] == SAMPLE_RATE
        assert abs(len(clips[m["file"][:-4]]) / SAMPLE_RATE - m["duration_s"]) < 1e-2


def test_total_size_under_1mb():
    folder = resources.files("refimpl").joinpath("data", "speech")
    total = sum(len(p.read_bytes()) for p in folder.iterdir() if p.name.endswith(".wav"))
    assert total < 1_100_000


def test_request_audios_deterministic_and_bounded():
    a = make_request_audios(8, seed=3)
    b = make_request_audios(8, seed=3)
    c = make_request_audios(8, seed=4)
    assert len(a) == 8
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, c))
    for x in a:
        assert x.dtype == np.float32 and x.ndim == 1
        assert SAMPLE_RATE <= len(x) <= 30 * SAMPLE_RATE
    assert len({len(x) for x in a}) > 1, "lengths should vary"


def test_request_audios_contain_clip_speech():
    clips = [c for _, c in load_speech_clips()]
    (x,) = make_request_audios(1, seed=0, min_s=20.0, max_s=20.0)
    assert len(x) == 20 * SAMPLE_RATE
    assert any(np.array_equal(x[: len(c)], c) for c in clips)


def test_request_audios_writable_copies():
    (x,) = make_request_audios(1, seed=1)
    x[:] = 0  # must not touch the shared clips
    assert all(np.abs(c).max() > 0 for _, c in load_speech_clips())


@pytest.mark.parametrize("kw", [dict(n=-1), dict(n=1, min_s=0.0), dict(n=1, min_s=5, max_s=2),
                                dict(n=1, gap_s=-1)])
def test_request_audios_bad_args(kw):
    kw.setdefault("seed", 0)
    with pytest.raises(ValueError):
        make_request_audios(**kw)


def test_zero_requests():
    assert make_request_audios(0, seed=0) == []
