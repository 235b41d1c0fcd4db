"""``refimpl report``'s terminal progress: papermill's records of a notebook as lines on stderr (each
code cell started, the kernel's stderr), h:mm:ss clocks, and a failure as one line. Read by
refimpl/lab/report.py.
"""
from __future__ import annotations

import contextlib
import datetime
import logging
import re
import sys
import time
from pathlib import Path
from typing import IO, Iterator, Optional

import nbformat

CELL_START = re.compile(r"Executing Cell (\d+)-*$")  # N over all cells, the injected parameters cell too


def clock(seconds: float) -> str:
    return str(datetime.timedelta(seconds=round(seconds)))  # h:mm:ss


class ProgressFormatter(logging.Formatter):
    """papermill's records of notebook ``nb`` as lines: each code cell started, the kernel's stderr."""

    def __init__(self, nb: Path, t0: float):
        super().__init__()
        self.nb, self.t0, self.last = nb.name, t0, ""
        self.labels: list[str | None] = []
        for c in nbformat.read(nb, as_version=4).cells:
            first = next((ln.strip() for ln in c.source.splitlines() if ln.strip()), "")
            self.labels.append(first if c.cell_type == "code" else None)
            if "parameters" in c.metadata.get("tags", []):
                self.labels.append("(injected parameters)")
        self.code = [i for i, label in enumerate(self.labels) if label is not None]

    def format(self, record: logging.LogRecord) -> str:
        msg, out = record.getMessage(), []
        m = CELL_START.match(msg.strip())
        if m and int(m[1]) - 1 in self.code:
            i = int(m[1]) - 1
            out.append(f"[report +{clock(time.perf_counter() - self.t0)}] {self.nb} cell "
                       f"{self.code.index(i) + 1}/{len(self.code)}: {str(self.labels[i])[:70]}")
        elif not m and record.levelno >= logging.WARNING:
            for piece in re.split(r"[\r\n]+", msg):
                if piece.strip() and piece.rstrip() != self.last:  # tqdm's close() repeats
                    self.last = piece.rstrip()
                    out.append(f"  {self.last}")
        return "".join(line + "\n" for line in out)


@contextlib.contextmanager
def terminal_progress(nb: Path, t0: float, stream: Optional[IO[str]] = None) -> Iterator[None]:
    """Progress lines of ``nb`` on ``stream`` (stderr) while in the block (``t0``: the report's
    perf_counter start); a line that fails is logging's handleError, never the report's."""
    logger, handler = logging.getLogger("papermill"), logging.StreamHandler(stream)
    handler.setFormatter(ProgressFormatter(nb, t0))
    handler.terminator = ""
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


def _one_line(e: BaseException) -> str:
    """``Type: first line of the message`` (papermill's error repeats the cell's traceback)."""
    msg = str(getattr(e, "evalue", None) or e).strip().splitlines()
    return f"{getattr(e, 'ename', None) or type(e).__name__}: {msg[0][:200] if msg else ''}".replace("|", "/")


def log(msg: str, t0: float) -> None:
    print(f"[report +{clock(time.perf_counter() - t0)}] {msg}", file=sys.stderr, flush=True)
