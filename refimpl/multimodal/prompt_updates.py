"""Prompt updates on token ids: expand each item's placeholder, or find it already expanded.

Mirrors ``apply_token_matches`` / ``find_mm_placeholders`` of ``vllm/multimodal/processing.py``
(0.9.0). ``updates``: modality -> (target ids, one replacement per item); placeholders come back
as {modality: [PlaceholderRange]}. Raises InvalidInputError("prompt") when placeholders and
items do not match one to one. Left out: text-level matches, ``PromptInsertion``, ``is_embed``.
"""
from __future__ import annotations

import numpy as np

from refimpl.errors import InvalidInputError
from refimpl.multimodal.inputs import PlaceholderRange

Updates = dict[str, tuple[list[int], list[list[int]]]]  # modality -> (target, per-item replacement)
Placeholders = dict[str, list[PlaceholderRange]]


def _check_count(found: dict[str, int], counts: dict[str, int]) -> None:
    for m, n in counts.items():
        if found.get(m, 0) != n:
            raise InvalidInputError("prompt", f"{n} {m} placeholder(s)",
                                    f"found {found.get(m, 0)} for {n} {m} item(s)")


def apply_token_matches(ids: list[int], updates: Updates,
                        counts: dict[str, int]) -> tuple[list[int], Placeholders]:
    """Replace the i-th target of each modality by item i's replacement, left to right."""
    out: list[int] = []
    nxt = {m: 0 for m in updates}
    ph: Placeholders = {m: [] for m in updates}
    i = 0
    while i < len(ids):
        for m, (target, repl) in updates.items():
            if nxt[m] < counts.get(m, 0) and ids[i:i + len(target)] == target:
                r = repl[nxt[m]]
                ph[m].append(PlaceholderRange(len(out), len(r)))
                out.extend(r)
                nxt[m] += 1
                i += len(target)
                break
        else:
            out.append(ids[i])
            i += 1
    _check_count(nxt, counts)
    return out, {m: v for m, v in ph.items() if v}


def find_mm_placeholders(ids: list[int], updates: Updates,
                         counts: dict[str, int]) -> tuple[list[int], Placeholders]:
    """Locate the already-expanded replacement of each item (the HF processor applied them)."""
    nxt = {m: 0 for m in updates}
    ph: Placeholders = {m: [] for m in updates}
    i = 0
    while i < len(ids):
        for m, (_, repl) in updates.items():
            if nxt[m] < counts.get(m, 0):
                r = repl[nxt[m]]
                if ids[i] == r[0] and ids[i:i + len(r)] == r:
                    ph[m].append(PlaceholderRange(i, len(r)))
                    nxt[m] += 1
                    i += len(r)
                    break
        else:
            i += 1
    _check_count(nxt, counts)
    return ids, {m: v for m, v in ph.items() if v}


def check_unused_placeholders(ids: list[int], updates: Updates, placeholders: Placeholders,
                              counts: dict[str, int]) -> None:
    """Raise InvalidInputError("prompt") for a placeholder outside every item's expansion (more
    placeholders than items; vLLM fails later, in the embedding merge)."""
    arr = np.asarray(ids, dtype=np.int64)
    covered = np.zeros(len(arr), dtype=bool)
    for ps in placeholders.values():
        for p in ps:
            covered[p.offset:p.offset + p.length] = True
    for m, (target, _) in updates.items():
        starts = np.flatnonzero((arr == target[0]) & ~covered)
        extra = sum(ids[i:i + len(target)] == target for i in starts.tolist())
        if extra:
            n = counts.get(m, 0)
            raise InvalidInputError("prompt", f"{n} {m} placeholder(s)",
                                    f"{n + extra} {m} placeholders for {n} {m} item(s)")
