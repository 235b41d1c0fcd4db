"""CUDA events around each step's model section of a WhisperRunner (issue 42's telemetry).

The device time of the forward (encoder, when the step encodes, and the decoder), read without a
host sync inside the step: ``start`` / ``stop`` only record events on the current stream; the caller
reads ``seconds()`` after the step (its sampled-id read has already waited for the stream) or after a
``torch.cuda.synchronize()`` outside what it times. vLLM's counterpart: the events its profiler and
``--collect-detailed-traces`` record; the V1 runner itself times nothing on the device. CUDA only.
"""
from __future__ import annotations

from typing import Optional

import torch

__all__ = ["ForwardEvents"]


class ForwardEvents:
    """Pairs of timing events, one pair per step that ran the model (``num_recorded``), oldest first."""

    def __init__(self) -> None:
        if not torch.cuda.is_available():
            raise RuntimeError("ForwardEvents records CUDA events: no CUDA device")
        self.pairs: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._open: Optional[torch.cuda.Event] = None

    @property
    def num_recorded(self) -> int:
        return len(self.pairs)

    def start(self) -> None:
        self._open = torch.cuda.Event(enable_timing=True)
        self._open.record()

    def stop(self) -> None:
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        assert self._open is not None, "stop() without start()"
        self.pairs.append((self._open, end))
        self._open = None

    def seconds(self) -> list[float]:
        """Each pair's device seconds; a pair whose end event has not completed yet blocks here."""
        for _, end in self.pairs:
            end.synchronize()
        return [a.elapsed_time(b) / 1e3 for a, b in self.pairs]

    def clear(self) -> None:
        self.pairs.clear()
