"""Terminal progress of ``refimpl report`` from papermill's own ``log_output`` records.

papermill logs ``Executing Cell N---`` (N over all cells, its injected parameters cell
included), the kernel's stdout at INFO and its stderr at WARNING. For one notebook,
:func:`terminal_progress` writes to stderr one ``[report +0:12:34] 01_x.ipynb cell 4/9: <first
line>`` per code cell started and each line of the kernel's stderr (the benches' tqdm bars,
warnings); the kernel's stdout and displayed values stay in the notebook.
"""
from __future__ import annotations

import contextlib
import logging
import re
import sys
import time
from pathlib import Path
from typing import IO, Iterator, Optional

import nbformat

_CELL_START = re.compile(r"Executing Cell (\d+)-*$")


def clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def cell_labels(nb_path: Path) -> list[Optional[str]]:
    """Per cell papermill runs: a code cell's first line, else None (its injected cell included)."""
    labels: list[Optional[str]] = []
    for c in nbformat.read(nb_path, as_version=4).cells:
        first = next((ln.strip() for ln in c.source.splitlines() if ln.strip()), "")
        labels.append(first if c.cell_type == "code" else None)
        if "parameters" in c.metadata.get("tags", []):
            labels.append("(injected parameters)")
    return labels


class ProgressHandler(logging.Handler):

    def __init__(self, nb_path: Path, t0: float, stream: Optional[IO[str]] = None):
        super().__init__(logging.INFO)
        self.name_ = nb_path.name
        self.labels = cell_labels(nb_path)
        self.code_cells = [i for i, lab in enumerate(self.labels) if lab is not None]
        self.t0 = t0
        self.stream = stream
        self.last = ""

    def _write(self, line: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(line + "\n")
        stream.flush()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
            m = _CELL_START.match(msg.strip())
            if m:
                idx = int(m.group(1)) - 1
                label = self.labels[idx] if 0 <= idx < len(self.labels) else None
                if label is not None:
                    k = self.code_cells.index(idx) + 1
                    self._write(f"[report +{clock(time.perf_counter() - self.t0)}] {self.name_} "
                                f"cell {k}/{len(self.code_cells)}: {label[:70]}")
            elif record.levelno >= logging.WARNING:
                for piece in re.split(r"[\r\n]+", msg):
                    if piece.strip() and piece.rstrip() != self.last:  # tqdm's close() repeats
                        self.last = piece.rstrip()
                        self._write(f"  {self.last}")
        except Exception:  # a progress line must never stop the report
            self.handleError(record)


@contextlib.contextmanager
def terminal_progress(nb_path: Path, t0: float, stream: Optional[IO[str]] = None) -> Iterator[None]:
    """Progress lines of ``nb_path`` while in the block (``t0``: the report's perf_counter start)."""
    logger = logging.getLogger("papermill")
    handler = ProgressHandler(nb_path, t0, stream)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
