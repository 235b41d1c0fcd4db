"""The engine-core process (P1): start-up, then a busy loop serving the front end over ZMQ.

Mirrors ``EngineCoreProc`` of ``vllm/v1/engine/core.py`` (0.9.0): build the EngineCore, say READY,
take ADD / ABORT / UTILITY messages, step while ``has_requests()``. ``reset_scope`` ``v0.9.0``
clears the P1 mirror only, ``all`` P1's processing cache too. A refused request is answered
REJECTED, a fatal error DEAD; SIGINT is ignored; the process exits with the front end's pipe.
Left out: IO threads, data parallelism, the batch queue.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

import torch
import zmq

from refimpl.engine.core import EngineCore
from refimpl.engine.mp import serial_utils
from refimpl.engine.mp.mm_input_cache import MirroredProcessingCache
from refimpl.errors import RefimplError
from refimpl.request import Request
from refimpl.utils.mem_utils import rss_bytes

RESET_SCOPES = ("v0.9.0", "all")


@dataclass
class EngineCoreRequest:
    """What P0 sends per request (vLLM ``EngineCoreRequest``): ``mm_inputs[i]`` None when P1 holds
    item i already (only ``mm_hashes[i]`` travels); ``request_id`` per submission,
    ``external_req_id`` the user's."""
    request_id: str
    prompt_token_ids: list[int]
    mm_inputs: list[Optional[dict]]
    mm_hashes: list[str]
    sampling_params: Any
    arrival_time: float
    external_req_id: Optional[str] = None


class EngineCoreProc(EngineCore):
    """EngineCore plus the P1 mirror; ``mirror`` = dict(capacity_bytes, use_cache, fault)."""

    def __init__(self, vllm_config, variant: str, *, reset_scope: str, mirror: dict):
        super().__init__(vllm_config, variant, reset_at_end=False)
        self.reset_scope = reset_scope
        self.mm_input_cache_server = MirroredProcessingCache.for_p1(**mirror)

    def add_core_request(self, request: EngineCoreRequest) -> None:
        """vLLM ``EngineCore.add_request``: fill the mirrored items, queue the request."""
        mm_inputs = self.mm_input_cache_server.get_and_update_p1(request.mm_inputs,
                                                                 request.mm_hashes)
        self.add_request(Request(
            request_id=request.request_id, prompt_token_ids=request.prompt_token_ids,
            mm_inputs=mm_inputs, mm_hashes=request.mm_hashes,
            sampling_params=request.sampling_params, arrival_time=request.arrival_time,
            external_req_id=request.external_req_id))

    def reset_mm_cache(self) -> None:
        """Clear the P1 mirror, and P1's processing cache under reset_scope 'all'."""
        if self.reset_scope == "all":
            super().reset_mm_cache()  # refused while requests are in flight
        self.mm_input_cache_server.reset()

    def memory_stats(self) -> dict:
        """pid, processing-cache bytes, RSS (bytes) and mirror counters of this process."""
        return dict(pid=os.getpid(), cache_bytes=self.mm_registry.cache_bytes(), rss=rss_bytes(),
                    mirror=self.mm_input_cache_server.stats())

    def registry_stats(self) -> dict:
        """This process's registry counters (ProcessingStats.as_dict())."""
        return self.mm_registry.stats.as_dict()

    def runner_state(self) -> dict[str, int]:
        """req_id -> bytes the model runner holds for that request (WhisperRunner.state_bytes;
        {} for a model this engine only starts up)."""
        runner = self.model_runner.whisper_runner
        return {} if runner is None else runner.state_bytes()

    def mirror_keys(self) -> list[str]:
        return self.mm_input_cache_server.keys()

    def mirror_probe(self, request: EngineCoreRequest) -> int:
        """The mirror half of ``add_core_request`` without queueing (the transport probe of a model this
        engine only starts up); the number of items filled from the mirror."""
        mm = self.mm_input_cache_server.get_and_update_p1(request.mm_inputs, request.mm_hashes)
        return sum(a is None and b is not None for a, b in zip(request.mm_inputs, mm))


def _watch_parent(stdin) -> None:
    while stdin.read(4096):
        pass
    os._exit(1)  # stdin closed: the front end is gone (or shut us down); never outlive it


def _raise_system_exit(signum, frame):
    raise SystemExit(0)


def main() -> None:
    """``python -m refimpl.engine.mp.core_proc``: an 8-byte length and the pickled kwargs of
    run_engine_core on stdin (kept open while the front end lives), then serve."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _raise_system_exit)
    stdin = sys.stdin.buffer
    n = int.from_bytes(stdin.read(8), "little")
    kwargs = pickle.loads(stdin.read(n))
    threading.Thread(target=_watch_parent, args=(stdin,), daemon=True).start()
    code = 1
    try:
        code = run_engine_core(**kwargs)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # no interpreter teardown while the stdin watcher blocks in read()


def run_engine_core(vllm_config, variant: str, reset_scope: str, mirror: dict,
                    input_address: str, output_address: str, token: bytes,
                    torch_threads: Optional[int]) -> int:
    """Start the engine core and serve the front end until SIGTERM (returns 0) or a fatal
    error (reported to the front end, returns 1)."""
    if torch_threads:
        torch.set_num_threads(torch_threads)
    ctx = zmq.Context()
    inp, out = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    inp.connect(input_address)
    out.connect(output_address)

    def send(*msg) -> None:
        out.send_multipart([token, *serial_utils.encode(msg)], copy=False)

    try:
        try:
            core = EngineCoreProc(vllm_config, variant, reset_scope=reset_scope, mirror=mirror)
        except Exception as e:
            send("FAILED", e)
            return 1
        send("READY", core.report, core.memory_stats())
        decode_s = 0.0
        while True:
            busy = core.scheduler.has_requests()  # finished ids undelivered count (vLLM PR #14388)
            if inp.poll(0 if busy else 1000):
                while inp.poll(0):
                    frames = inp.recv_multipart(copy=False)
                    if frames[0].bytes != token:
                        continue  # not from our front end: never unpickled
                    t0 = time.perf_counter()
                    kind, *args = serial_utils.decode([f.buffer for f in frames[1:]])
                    decode_s += time.perf_counter() - t0
                    if kind == "ADD":
                        try:
                            core.add_core_request(args[0])
                        except RefimplError as e:  # a bad request: refused, serving goes on
                            send("REJECTED", args[0].request_id, e)
                        except Exception as e:  # vLLM: fatal, the engine core dies
                            send("DEAD", e)
                            return 1
                    elif kind == "ABORT":
                        core.abort_requests(args[0])
                    elif kind == "UTILITY":
                        call_id, method, margs = args
                        try:
                            if method == "decode_s":
                                result = decode_s
                            else:
                                result = getattr(core, method)(*margs)
                            send("UTILITY", call_id, result, None)
                        except Exception as e:
                            send("UTILITY", call_id, None, e)
            if core.scheduler.has_requests():
                try:
                    send("OUTPUT", core.step())
                except Exception as e:
                    send("DEAD", e)
                    return 1
    except SystemExit:
        return 0
    finally:
        inp.close(linger=0)
        out.close(linger=1000)  # let the last message (DEAD / FAILED) leave
        ctx.term()


if __name__ == "__main__":
    main()
