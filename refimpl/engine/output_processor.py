"""OutputProcessor: the front end's requests in flight, by internal id, and the user's ids.

Mirrors the request bookkeeping of ``vllm/v1/engine/output_processor.py`` with an internal id
per submission (refimpl: a per-engine counter): an output, rejection or abort of an earlier
submission never answers a later one under the same user id. Left out: detokenisation,
streaming, n > 1.
"""
from __future__ import annotations

import itertools
from typing import Iterable, Optional

from refimpl.outputs import RequestOutput


class OutputProcessor:

    def __init__(self):
        self.request_states: dict[str, str] = {}    # internal id -> user's id
        self.external_req_ids: dict[str, str] = {}  # user's id in flight -> internal id
        self._counter = itertools.count()

    def assign_request_id(self, external_req_id: str) -> str:
        """A new internal id ``<user's id>-<n>``, n unique per engine."""
        return f"{external_req_id}-{next(self._counter)}"

    def add_request(self, request_id: str, external_req_id: str) -> None:
        self.request_states[request_id] = external_req_id
        self.external_req_ids[external_req_id] = request_id

    def finish_request(self, request_id: str) -> Optional[str]:
        """Forget an internal id; returns its user's id (None: not in flight)."""
        external = self.request_states.pop(request_id, None)
        if external is not None:
            del self.external_req_ids[external]
        return external

    def abort_requests(self, external_req_ids: Iterable[str]) -> list[str]:
        """The internal ids of the user's ids in flight, forgotten (unknown ids are skipped)."""
        ids = [self.external_req_ids[e] for e in external_req_ids if e in self.external_req_ids]
        for rid in ids:
            self.finish_request(rid)
        return ids

    def process_outputs(self, outputs: list[RequestOutput]) -> list[RequestOutput]:
        """Finished outputs renamed to the user's ids; those of requests no longer in flight
        (aborted since) are dropped."""
        done = []
        for out in outputs:
            external = self.finish_request(out.request_id)
            if external is not None:
                out.request_id = external
                done.append(out)
        return done

    def has_unfinished_requests(self) -> bool:
        return bool(self.request_states)
