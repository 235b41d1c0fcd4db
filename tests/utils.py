"""Import shim: the scheduler test helpers moved to refimpl.testing (installed, documented;
see docs/testing.md). Tests keep importing ``from utils import ...``; new tests may import
from refimpl.testing directly.

Two names are kept here for refimpl's own tests only: ``patch_registry`` swaps the global
``refimpl.multimodal.MULTIMODAL_REGISTRY`` for a FakeRegistry (mock.patch, create=True), and
``create_vllm_config`` / ``create_scheduler(..., registry=)`` build the config inside such a
patch. Prefer
``create_vllm_config(..., mm_registry=FakeRegistry())``: the config then reads that registry,
nothing global is patched.
"""
from __future__ import annotations

import contextlib
from typing import Optional
from unittest import mock

from refimpl.sampling_params import SamplingParams
from refimpl.testing import (  # noqa: F401 - re-exported
    ENCODER_LEN,
    QWEN,
    WHISPER,
    WHISPER_PROMPT,
    FakeModelRunner,
    FakeRegistry,
    create_requests,
    fake_token,
    run_to_completion,
)
from refimpl.testing import create_scheduler as _create_scheduler
from refimpl.testing import create_vllm_config as _create_vllm_config


def patch_registry(registry: Optional[FakeRegistry] = None):
    """Context manager installing ``registry`` (a new FakeRegistry by default) as
    ``refimpl.multimodal.MULTIMODAL_REGISTRY``; yields it."""
    registry = registry or FakeRegistry()

    @contextlib.contextmanager
    def _cm():
        with mock.patch("refimpl.multimodal.MULTIMODAL_REGISTRY", registry, create=True):
            yield registry
    return _cm()


def create_vllm_config(model: str = WHISPER, *, registry: Optional[FakeRegistry] = None, **kw):
    """refimpl.testing.create_vllm_config, built while ``registry`` is patched in as the global."""
    with patch_registry(registry):
        return _create_vllm_config(model, **kw)


def create_scheduler(model: str = WHISPER, *, registry: Optional[FakeRegistry] = None, **kw):
    """refimpl.testing.create_scheduler, its config built while ``registry`` is patched in."""
    with patch_registry(registry):
        return _create_scheduler(model, **kw)


def audio_prompt(audio) -> dict:
    """A Whisper prompt of one 16 kHz audio."""
    return {"multi_modal_data": {"audio": (audio, 16000)}}


def greedy(k: int) -> SamplingParams:
    """``k`` tokens, EOS ignored."""
    return SamplingParams(max_tokens=k, ignore_eos=True)
