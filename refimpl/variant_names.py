"""Row names: the 0.1.0 names of the rows (``LEGACY_NAMES``) and how an old name resolves.

Accepted with a DeprecationWarning until 0.3.0 (``current_row_name``), and the labels of older
results (``legacy_name``). Read by refimpl.variants and refimpl.encoder_len_variants, which look
the rows up; refimpl.variants re-exports every name.
"""
from __future__ import annotations

import warnings

# Rows of results written before the release rows -> the row each was, at the figures'
# settings (128k, default max_pixels: the frame cap, frame fitting and worst-case rule did not
# change a dummy there; the old rows skipped oversize items and used the true worst case).
LEGACY_NAMES: dict[str, str] = {
    "no-cache": "0.8.5", "cache-reset": "0.9.0", "hash-nocopy": "0.9.0+#19484",
    "hash-stream": "0.9.0+#24925", "uint8-video": "0.9.0+#24925+uint8",
    "formula": "0.9.0+#19756+#24925+uint8", "shape-only": "0.9.0+#19756+#24925+uint8+shape-only",
    "registry": "0.10.2", "runner-config": "0.10.2+#24866",  # and #24989's runner site, read once at init
    "scheduler-config": "0.11.0", "encoder-batch": "audios-per-step",
}


def legacy_name(name: str) -> str:
    """The current label of a row name from an older result (``name`` itself if not old;
    an ``@N`` suffix is kept: ``encoder-batch@4`` -> ``audios-per-step@4``)."""
    base, at, n = name.partition("@")
    return LEGACY_NAMES.get(base, base) + at + n


SHAPE_ONLY_BEFORE_0_2 = LEGACY_NAMES["shape-only"]  # what "shape-only" named in 0.1.0


def current_row_name(name: str, *, stacklevel: int = 2) -> str:
    """The row an old name (``LEGACY_NAMES``, accepted until 0.3.0) now is, with a
    DeprecationWarning naming it; any other name is returned as it is. ``"shape-only"`` is a
    current row that named another one in 0.1.0: it is returned as it is, with a warning saying
    which row it now means and the name of the row it meant. An ``@N`` suffix is kept."""
    base, at, n = name.partition("@")
    if base == "shape-only":
        warnings.warn(f"row name 'shape-only' now means refimpl's shape-only row (the kit's default "
                      f"with the profile run's inputs at their processed shape); in 0.1.0 it meant "
                      f"{SHAPE_ONLY_BEFORE_0_2!r}: pass that name for the old row", DeprecationWarning,
                      stacklevel=stacklevel + 1)
    elif base in LEGACY_NAMES:
        new = LEGACY_NAMES[base] + at + n
        warnings.warn(f"row name {base!r} is deprecated since 0.2.0 (removed in 0.3.0): it is row "
                      f"{new!r}", DeprecationWarning, stacklevel=stacklevel + 1)
        return new
    return name
