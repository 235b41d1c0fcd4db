"""Terminal progress of ``refimpl report``, built on papermill's own ``log_output``.

With ``log_output=True`` papermill logs to the ``papermill`` logger: ``Executing Cell N---``
when cell N (1-based, over all cells, papermill's injected-parameters cell included) starts,
the kernel's stdout at INFO, its stderr at WARNING, and the text form of displayed values at
INFO. :func:`terminal_progress` attaches a handler for the duration of one notebook that
writes, to this process's stderr:

* for each code cell started: ``[report +0:12:34] 01_x.ipynb cell 4/9: <first line>``;
* the kernel's stderr, one line per carriage-return or newline separated piece: the
  benchmark driver's tqdm bar (``startup: 3/9 [01:40<03:20, 0.9.0 repeat 2/3]``),
  warnings and tracebacks printed there.

Left out: the kernel's stdout and displayed values (tables and figures go into the notebook),
papermill's other INFO lines.
"""
from __future__ import annotations

import contextlib
import logging
import re
import sys
import time
from pathlib import Path
from typing import IO, Iterator, Optional

_CELL_START = re.compile(r"Executing Cell (\d+)-*$")


def clock(seconds: float) -> str:
    """``h:mm:ss`` of a non-negative duration in seconds."""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def cell_labels(nb_path: Path) -> list[Optional[str]]:
    """One entry per cell papermill will run: the first source line of code cells, None for
    the others; an entry for papermill's injected-parameters cell follows the ``parameters``
    cell (papermill inserts it there)."""
    import nbformat
    labels: list[Optional[str]] = []
    for c in nbformat.read(nb_path, as_version=4).cells:
        first = next((ln.strip() for ln in c.source.splitlines() if ln.strip()), "")
        labels.append(first if c.cell_type == "code" else None)
        if "parameters" in c.metadata.get("tags", []):
            labels.append("(injected parameters)")
    return labels


class ProgressHandler(logging.Handler):
    """Writes papermill's ``log_output`` records of one notebook as progress lines (see module)."""

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
    """Show papermill's ``log_output`` records of ``nb_path`` as progress lines while in the
    block; ``t0`` (``time.perf_counter()`` seconds) is when the report started. Restores the
    ``papermill`` logger's level and propagation on exit."""
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
