"""The front end's handle on the engine-core process (P0 side of the two-process engine).

Mirrors ``MPClient`` / ``SyncMPClient`` of ``vllm/v1/engine/core_client.py`` (0.9.0): spawn the
engine core, push requests and pull outputs over ZMQ, call utilities by id, tear down on
collection, exit or the child's death (EngineDeadError). Both sockets are ``ipc://`` paths in
a private (0700) directory and every message carries a per-engine secret, checked before
unpickling. Left out: ROUTER/DEALER sockets (PUSH/PULL both ways), the output thread.
"""
from __future__ import annotations

import collections
import itertools
import os
import pickle
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Optional

import zmq

from refimpl.engine.mp import serial_utils
from refimpl.errors import ConfigError, EngineDeadError

STARTUP_TIMEOUT_S = 1800.0
POLL_MS = 200  # how often a waiting front end checks that the child still runs


def _torch_threads() -> Optional[int]:
    """This process's torch thread count for the child (None: torch not imported here)."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def _child_env() -> dict:
    """This environment, with the directory holding this refimpl first on PYTHONPATH."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


@dataclass
class TransportStats:
    """Front-end transport counters: messages and bytes sent, seconds encoding / decoding."""
    messages_sent: int = 0
    bytes_sent: int = 0
    encode_s: float = 0.0
    bytes_received: int = 0
    decode_s: float = 0.0
    per_request: dict = field(default_factory=dict)  # user's request id -> (bytes, items sent whole, items as hash)


class _Resources:
    """Everything to free; a finalizer without a reference back to the client (as vLLM)."""

    def __init__(self):
        self.ctx = zmq.Context()
        self.tmpdir = tempfile.mkdtemp(prefix="refimpl-engine-")  # mode 0700
        self.sockets: list = []
        self.proc: Any = None  # subprocess.Popen once started
        self.dead = False

    def __call__(self) -> None:
        self.dead = True
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.proc.stdin.close()
        for s in self.sockets:
            s.close(linger=0)
        self.ctx.term()
        shutil.rmtree(self.tmpdir, ignore_errors=True)


class SyncMPClient:
    """Start the engine core in a child process; ``mirror`` as EngineCoreProc's. Raises the child's
    ConfigError for a refused setting, EngineDeadError when it fails to start otherwise or exits.
    ``startup_report``: the child's StartupReport; ``startup_memory``: its memory_stats at READY."""

    def __init__(self, vllm_config, variant: str, *, reset_scope: str, mirror: dict,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S):
        self.resources = r = _Resources()
        self._finalizer = weakref.finalize(self, r)
        self.stats = TransportStats()
        self._token = secrets.token_bytes(16)
        self._call_ids = itertools.count()
        self._outputs: collections.deque = collections.deque()
        in_addr, out_addr = f"ipc://{r.tmpdir}/input", f"ipc://{r.tmpdir}/output"
        try:
            self._input = r.ctx.socket(zmq.PUSH)
            r.sockets.append(self._input)
            self._input.bind(in_addr)
            self._output = r.ctx.socket(zmq.PULL)
            r.sockets.append(self._output)
            self._output.bind(out_addr)
            args = pickle.dumps(dict(
                vllm_config=vllm_config, variant=variant, reset_scope=reset_scope, mirror=mirror,
                input_address=in_addr, output_address=out_addr, token=self._token,
                torch_threads=_torch_threads()))
            r.proc = subprocess.Popen([sys.executable, "-m", "refimpl.engine.mp.core_proc"],
                                      stdin=subprocess.PIPE, env=_child_env())
            r.proc.stdin.write(len(args).to_bytes(8, "little") + args)
            r.proc.stdin.flush()  # stdin stays open: the child exits when it closes
            kind, *rest = self._recv(startup_timeout_s)
            if kind == "FAILED":
                if isinstance(rest[0], ConfigError):  # a setting the user gave (issue 8, kind 6):
                    raise rest[0]                    # refused by name, as an in-process start-up
                raise EngineDeadError("engine_core", "a successful start-up",
                                      f"start-up failed: {rest[0]!r}") from rest[0]
            self.startup_report, self.startup_memory = rest
        except BaseException:
            self._finalizer()
            raise

    @property
    def pid(self) -> int:
        return self.resources.proc.pid

    def _dead(self, why: str, cause: Optional[BaseException] = None) -> EngineDeadError:
        proc = self.resources.proc
        self._finalizer()
        err = EngineDeadError("engine_core", "alive",
                              f"engine core process {proc.pid} {why} (exit code {proc.returncode})")
        err.__cause__ = cause
        return err

    def _send(self, *msg) -> int:
        if self.resources.dead or self.resources.proc.poll() is not None:
            raise self._dead("is not running")
        t0 = time.perf_counter()
        frames = serial_utils.encode(msg)
        self.stats.encode_s += time.perf_counter() - t0
        n = serial_utils.nbytes(frames)
        self._input.send_multipart([self._token, *frames], copy=False)
        self.stats.messages_sent += 1
        self.stats.bytes_sent += n
        return n

    def _recv(self, timeout_s: Optional[float] = None) -> tuple:
        """Next message from the child; raises EngineDeadError if it exits first."""
        if self.resources.dead:
            raise self._dead("is not running")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            if self._output.poll(POLL_MS):
                frames = self._output.recv_multipart(copy=False)
                if frames[0].bytes != self._token:
                    continue  # not from our child: never unpickled
                t0 = time.perf_counter()
                msg = serial_utils.decode([f.buffer for f in frames[1:]])
                self.stats.decode_s += time.perf_counter() - t0
                self.stats.bytes_received += sum(len(f.buffer) for f in frames[1:])
                if msg[0] == "DEAD":
                    raise self._dead(f"failed: {msg[1]!r}", msg[1])
                return msg
            if self.resources.proc.poll() is not None:
                raise self._dead("exited")
            if deadline is not None and time.monotonic() >= deadline:
                raise self._dead(f"gave no answer within {timeout_s} s")

    # -- the EngineCoreClient interface ------------------------------------------------
    def add_request(self, request) -> int:
        """Send one EngineCoreRequest; returns the bytes it put on the wire."""
        n = self._send("ADD", request)
        sent = sum(x is not None for x in request.mm_inputs)
        self.stats.per_request[request.external_req_id or request.request_id] = (n, sent, len(request.mm_inputs) - sent)
        return n

    def abort_requests(self, request_ids: list[str]) -> None:
        if request_ids and not self.resources.dead:
            self._send("ABORT", list(request_ids))

    def get_output(self) -> tuple:
        """The next of ``("OUTPUT", [RequestOutput finished in one engine step])`` and
        ``("REJECTED", request_id, RefimplError)`` (the engine core refused a request)."""
        if self._outputs:
            return self._outputs.popleft()
        while True:
            msg = self._recv()
            if msg[0] in ("OUTPUT", "REJECTED"):
                return msg

    def call_utility(self, method: str, *args) -> Any:
        """Run ``EngineCoreProc.<method>(*args)`` in the child; re-raises its exception."""
        call_id = next(self._call_ids)
        self._send("UTILITY", call_id, method, args)
        while True:
            kind, *rest = msg = self._recv()
            if kind in ("OUTPUT", "REJECTED"):
                self._outputs.append(msg)
            elif kind == "UTILITY" and rest[0] == call_id:
                if rest[2] is not None:
                    raise rest[2]
                return rest[1]

    def reset_mm_cache(self) -> None:
        self.call_utility("reset_mm_cache")

    def shutdown(self) -> None:
        self._finalizer()
