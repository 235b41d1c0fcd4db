"""The two-process engine (process_mode="mp"): P0 here, the engine core in a child process.

One Whisper-tiny engine is shared by the module (a child that imports torch costs seconds);
the test that kills its child runs last. Mirror capacity: 2.5 items of 960,000 bytes.
- start-up of the 0.9.0 row (reset scope v0.9.0): P0's cache is empty, P1 keeps its profiling
  entry; under scope "all" (the default row's) the reset empties P1's cache too;
- a repeated audio crosses as its hash alone; evictions and resets keep the mirrors equal;
- nothing listens on a network address; a message without the engine's secret is never
  unpickled;
- the front end's death (SIGKILL, Ctrl-C) leaves no engine-core process behind; the engine
  core's death raises EngineDeadError in P0 and frees the sockets and the IPC directory.
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap

import numpy as np
import psutil
import pytest
import zmq

from refimpl.engine.llm_engine import LLMEngine
from refimpl.errors import EngineDeadError, EngineStateError
from refimpl.sampling_params import SamplingParams

pytestmark = pytest.mark.slow  # two-process engines


CAPACITY_GB = 2.5 * 960_000 / (1 << 30)
PARAMS = SamplingParams(max_tokens=3)


def _audio(seed: int) -> dict:
    a = np.random.default_rng(seed).normal(0, 0.1, 4000 + 500 * seed).astype(np.float32)
    return {"multi_modal_data": {"audio": a}}


@pytest.fixture(scope="module")
def engine():
    e = LLMEngine.from_args("whisper-tiny", startup_variant="0.9.0", device="cpu", max_num_seqs=4,
                            num_gpu_blocks=4 * 97 + 1, process_mode="mp", mm_processor_cache_gb=CAPACITY_GB)
    yield e
    e.shutdown()
    from refimpl.multimodal import MULTIMODAL_REGISTRY
    MULTIMODAL_REGISTRY.reset_processor_cache()  # P0 is this process: leave its cache empty


def _sent(engine, rid: str) -> tuple[int, int, int]:
    return engine.engine_core.client.stats.sent(rid)


def test_startup_v090_reset_leaves_p1_cache(engine):
    mem = engine.engine_core.startup_memory
    assert engine.engine_core.pid != os.getpid()
    assert mem["p0_cache_bytes_after_reset"] == 0  # P0's processing cache: cleared
    assert mem["p1_cache_bytes_before_reset"] == mem["p1_cache_bytes_after_reset"] > 0


def test_repeat_crosses_as_hash_and_mirrors_agree(engine):
    ids = [engine.add_request(f"r{i}", _audio(s), PARAMS) for i, s in enumerate([0, 1, 0])]
    outs = {}
    while engine.has_unfinished_requests():
        outs.update({o.request_id: o for o in engine.step()})
    assert sorted(outs) == ids
    assert outs["r0"].output_token_ids == outs["r2"].output_token_ids
    (n0, whole0, hash0), (n2, whole2, hash2) = _sent(engine, "r0"), _sent(engine, "r2")
    assert (whole0, hash0, whole2, hash2) == (1, 0, 0, 1)
    assert n2 < 2_000 < 960_000 < n0
    assert engine.engine_core.mirrors_agree()


def test_eviction_and_reset_keep_mirrors_in_step(engine):
    ids = [engine.add_request(f"e{i}", _audio(s), PARAMS)  # 3 new items evict audio 0
           for i, s in enumerate([2, 3, 4, 0])]               # (capacity 2.5 items)
    engine.abort_request(ids)  # aborts leave the mirrors alone
    assert not engine.has_unfinished_requests()
    assert _sent(engine, "e3")[1] == 1  # sent whole again
    assert engine.engine_core.mirrors_agree()
    engine.reset_mm_cache()
    mem = engine.engine_core.memory_stats()
    assert mem["p0"]["mirror"]["entries"] == mem["p1"]["mirror"]["entries"] == 0
    assert mem["p0"]["cache_bytes"] == 0
    engine.generate([_audio(0)], PARAMS)
    assert engine.engine_core.mirrors_agree()


def test_reset_scope_all_also_clears_p1_cache(engine):
    client = engine.engine_core.client
    assert engine.engine_core.memory_stats()["p1"]["cache_bytes"] > 0  # v0.9.0 left it
    client.call_utility("__setattr__", "reset_scope", "all")  # the child's EngineCoreProc
    engine.reset_mm_cache()
    assert engine.engine_core.memory_stats()["p1"]["cache_bytes"] == 0


def test_refused_request_raises_and_serving_goes_on(engine):
    from refimpl.engine.mp.core_proc import EngineCoreRequest
    from refimpl.errors import InvalidInputError
    engine.add_request("ok", _audio(1), PARAMS)
    with pytest.raises(InvalidInputError, match="request_id"):  # P0's check
        engine.add_request("ok", _audio(1), PARAMS)
    # a request only the engine core's scheduler refuses (a 448-token prompt), sent straight
    # to it with audio 1 as a bare hash
    engine.engine_core.client.add_request(EngineCoreRequest("bad", [50258] * 448, [None],
                                                            [_hash(engine, 1)], PARAMS, 0.0))
    engine.engine_core._in_flight.add("bad")  # as MPFrontend.add_request would
    done = []
    with pytest.raises(InvalidInputError, match="prompt_token_ids"):
        while engine.has_unfinished_requests():
            done += engine.step()
    while engine.has_unfinished_requests():
        done += engine.step()
    assert [o.request_id for o in done] == ["ok"] and done[0].output_token_ids
    assert engine.engine_core.mirrors_agree()


def _hash(engine, seed: int) -> str:
    proc = engine.processor
    return proc.apply("", _audio(seed)["multi_modal_data"], return_mm_hashes=True).mm_hashes["audio"][0]


def test_scheduler_is_not_reachable_from_the_front_end(engine):
    with pytest.raises(EngineStateError, match="engine-core process"):
        _ = engine.scheduler


def test_nothing_listens_on_a_network_address(engine):
    for pid in (os.getpid(), engine.engine_core.pid):
        for c in psutil.Process(pid).net_connections(kind="inet"):
            assert c.laddr.ip in ("127.0.0.1", "::1"), c
    tmpdir = engine.engine_core.client.resources.tmpdir
    assert os.stat(tmpdir).st_mode & 0o077 == 0


class _Marker:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def test_message_without_the_secret_is_never_unpickled(engine, tmp_path):
    marker = tmp_path / "unpickled"
    ctx = zmq.Context()
    forger = ctx.socket(zmq.PUSH)
    forger.connect(f"ipc://{engine.engine_core.client.resources.tmpdir}/output")
    forger.send_multipart([b"\0" * 16, pickle.dumps(("UTILITY", 0, _Marker(str(marker)), None))])
    forger.close(linger=1000)
    ctx.term()
    assert engine.engine_core.mirrors_agree()  # a round trip: P0 read past the forged message
    assert not marker.exists()


def test_engine_core_killed_raises_and_frees(engine):
    client = engine.engine_core.client
    os.kill(client.pid, signal.SIGKILL)
    with pytest.raises(EngineDeadError, match="engine core process"):
        engine.generate([_audio(0)], PARAMS)
    assert client.resources.proc.returncode is not None
    assert not os.path.exists(client.resources.tmpdir)
    assert client._input.closed and client._output.closed
    with pytest.raises(EngineDeadError):
        engine.add_request("after", _audio(0), PARAMS)


P0_SCRIPT = textwrap.dedent("""
    import faulthandler, pickle, signal, sys, threading, time, psutil
    # Ctrl-C raises KeyboardInterrupt, as in a terminal: a front end started from a background job of a
    # non-interactive shell (CI scripts, `cmd &`) inherits SIGINT ignored, and Python keeps that
    signal.signal(signal.SIGINT, signal.default_int_handler)
    faulthandler.dump_traceback_later(150)  # where P0 is, should it not exit (stderr; the test shows it)
    from refimpl.engine.mp.core_client import SyncMPClient
    cfg = pickle.load(open(sys.argv[1], "rb"))  # built by the test: no torch import here
    def watch():
        while not (core := [c for c in psutil.Process().children() if is_core(c)]):
            time.sleep(0.05)  # the engine core, not a helper an import may spawn (ldconfig, uname)
        print(core[0].pid, flush=True)
    def is_core(c):
        try:
            return "refimpl.engine.mp.core_proc" in c.cmdline()
        except psutil.Error:
            return False
    threading.Thread(target=watch, daemon=True).start()
    mirror = dict(capacity_bytes=1 << 20, use_cache=True, fault=None)
    SyncMPClient(cfg, "0.9.0", reset_scope="v0.9.0", mirror=mirror)
    time.sleep(600)
""")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_front_end_death_leaves_no_orphan(sig, engine, tmp_path):
    cfg = tmp_path / "cfg.pkl"
    cfg.write_bytes(pickle.dumps(engine.vllm_config))
    err = (tmp_path / "p0.err").open("w")  # a file, not a pipe: the engine core inherits it
    p0 = subprocess.Popen([sys.executable, "-c", P0_SCRIPT, str(cfg)], stdout=subprocess.PIPE,
                          stderr=err, text=True, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    try:
        child = psutil.Process(int(p0.stdout.readline()))  # the engine core, starting up
        p0.send_signal(sig)
        try:
            p0.wait(180)  # the child may still be importing torch on a loaded machine
        except subprocess.TimeoutExpired:
            p0.kill()
            pytest.fail(f"the front end outlived {sig!r} by 180 s; its stderr (threads at 150 s):\n"
                        + (tmp_path / "p0.err").read_text())
        child.wait(180)  # raises psutil.TimeoutExpired if the child outlives its front end
    finally:
        p0.kill()
        err.close()


@pytest.mark.soak
@pytest.mark.parametrize("scope", ["v0.9.0", "all"])
def test_startup_bench_record_per_scope(scope):
    from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from refimpl.lab.bench.startup import two_process_record
    cfg = VllmConfig(ModelConfig("whisper-tiny", device="cpu"), SchedulerConfig(max_num_seqs=2),
                     CacheConfig(num_gpu_blocks=200))
    _, rec = two_process_record(cfg, "0.9.0", scope)
    assert rec["p1_cache_bytes_before_reset"] > 0
    assert rec["p1_cache_bytes_after_reset"] == (rec["p1_cache_bytes_before_reset"] if scope == "v0.9.0" else 0)
    t = rec["transport"]
    assert t["bytes_hit"] < 2_000 < 960_000 < t["bytes_miss"]
    assert not psutil.pid_exists(rec["p1_pid"]) or psutil.Process(rec["p1_pid"]).status() == "zombie"


@pytest.mark.soak
def test_desync_through_the_child_is_fatal_and_freed():
    """Fault reset-p1-only in the real two processes: P1 gets a bare hash it lacks (KeyError,
    as upstream), dies, and P0 raises EngineDeadError with the KeyError as its cause."""
    e = LLMEngine.from_args("whisper-tiny", device="cpu", max_num_seqs=2, num_gpu_blocks=200,
                            process_mode="mp", mirror_fault="reset-p1-only")
    e.generate([_audio(0)], PARAMS)
    e.reset_mm_cache()
    with pytest.raises(EngineDeadError) as info:
        e.generate([_audio(0)], PARAMS)
    assert isinstance(info.value.__cause__, KeyError)
    assert not os.path.exists(e.engine_core.client.resources.tmpdir)


def _run(scope: str, p1_before: int, p1_rss: int) -> dict:
    mib = 1 << 20
    after = p1_before if scope == "v0.9.0" else 0
    return {"process_mode": "mp", "reset_scope": scope, "max_model_len": 8192,
            "p0_cache_bytes_before_reset": 0, "p0_cache_bytes_after_reset": 0,
            "p0_rss_before_reset": 500 * mib, "p0_rss_after_reset": 500 * mib,
            "p1_cache_bytes_before_reset": p1_before, "p1_cache_bytes_after_reset": after,
            "p1_rss_before_reset": p1_rss, "p1_rss_after_reset": p1_rss - (p1_before - after),
            "transport": {"bytes_miss": 7_000_000, "bytes_hit": 2_000, "encode_s_miss": 2e-4,
                          "encode_s_hit": 5e-5, "decode_s": 3e-3, "modality": "image"}}


def test_memory_table_medians_and_spread_of_both_processes():
    from refimpl.lab.bench.startup import summarize_two_process
    from refimpl.lab.studies.startup_tables import memory_table
    mib = 1 << 20
    runs = [_run("v0.9.0", 588 * mib, r * mib) for r in (2100, 2132, 2140)]
    s = summarize_two_process(runs)
    assert s["p1_cache_bytes_after_reset"]["median"] == 588 * mib and s["p1_rss_before_reset"]["n"] == 3
    assert s["transport_bytes_hit"]["median"] == 2_000
    assert summarize_two_process([{"process_mode": "inproc"}]) == {}
    md = memory_table({"v0.9.0 (this run)": {"runs": runs},
                       "all (this run)": {"runs": [_run("all", 588 * mib, 2132 * mib)]}})
    v090, alls = (ln for ln in md.splitlines() if ln.startswith(("| v0.9.0", "| all")) and "MiB" not in ln
                  and "7,000,000" not in ln)
    assert "| 588 -> 588 |" in v090 and "| 2132 [2100, 2140] -> 2132 [2100, 2140] |" in v090
    assert "| 588 -> 0 |" in alls and "| 2132 -> 1544 |" in alls
    assert "| 7,000,000 | 2,000 |" in md  # bytes of one request, mirror miss / hit


def test_quick_mode_shows_the_committed_runs_of_both_scopes(tmp_path):
    from refimpl.lab.studies.startup import StartupStudy
    from refimpl.lab.studies.startup_tables import memory_table
    rows = StartupStudy(mode="quick", out_dir=tmp_path).two_process()
    assert {label.split()[0] for label in rows} == {"v0.9.0", "all"}
    assert all(r["_path"].startswith("results/") for r in rows.values())
    md = memory_table(rows)
    assert all(f"| {label} |" in md for label in rows)
