"""Issue 21's example inputs of kinds 1, 2 and 4 and the value each gives in this checkout.

    PYTHONPATH=. .venv/bin/python scripts/issue21_faults.py [--kinds 1,2,4]

Run it on a commit before and after the fixes to get the before / after values (the tests
named in docs/reliability.md guard each kind). whisper-tiny on the CPU, both process modes
(each engine start-up takes 10-30 s).
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from refimpl.audio import load_speech_clips  # noqa: E402
from refimpl.engine.llm_engine import LLMEngine  # noqa: E402
from refimpl.sampling_params import SamplingParams  # noqa: E402

CLIPS = [c[1] for c in load_speech_clips()]


def _prompt(i: int) -> dict:
    return {"multi_modal_data": {"audio": (CLIPS[i], 16000)}}


def _engine(mode: str) -> LLMEngine:
    return LLMEngine.from_args("whisper-tiny", device="cpu", num_gpu_blocks=300, process_mode=mode)


def _held(e: LLMEngine):
    """(requests, bytes) of tensor state the model runner holds."""
    if e.process_mode == "mp":
        try:
            held = e.engine_core.client.call_utility("runner_state")
        except AttributeError:
            return "not readable in this checkout (no runner_state utility in P1)"
        return len(held), sum(held.values())
    held = e.model_runner.whisper_runner.state_bytes()      # features and cross K/V rows
    return len(held), sum(held.values())


def kind1():
    for mode in ("inproc", "mp"):
        e = _engine(mode)
        e.add_request("a", _prompt(0), SamplingParams(max_tokens=1))
        while e.has_unfinished_requests():
            e.step()
        print(f"kind 1 ({mode}): one request of max_tokens=1 drained; runner holds {_held(e)}")
        e.add_request("b", _prompt(1), SamplingParams(max_tokens=20))
        e.add_request("c", _prompt(2), SamplingParams(max_tokens=20))
        if mode == "inproc":
            e.step()
            e.step()
        else:
            time.sleep(8)  # P1 admits both (one audio per step) and decodes
        e.abort_request(["b", "c"])
        while e.has_unfinished_requests():
            e.step()
        print(f"kind 1 ({mode}): two started, then aborted; runner holds {_held(e)}")
        e.shutdown()


def kind2():
    e, ref = _engine("mp"), _engine("inproc")
    e.add_request("X", _prompt(0), SamplingParams(max_tokens=1))
    time.sleep(8.0)  # P1 finishes it; P0 does not read the output
    e.abort_request(["X"])
    e.add_request("X", _prompt(1), SamplingParams(max_tokens=7, ignore_eos=True))
    got = {}
    while e.has_unfinished_requests():
        got.update({o.request_id: o.output_token_ids for o in e.step()})
    own = ref.generate([_prompt(1)], SamplingParams(max_tokens=7, ignore_eos=True))[0].output_token_ids
    old = ref.generate([_prompt(0)], SamplingParams(max_tokens=1))[0].output_token_ids
    print(f"kind 2 (mp): the new 'X' returned {got.get('X')}; its own tokens {own}; the old 'X''s {old}")
    e.shutdown()


def kind4():
    for mode in ("inproc", "mp"):
        e = _engine(mode)
        e.add_request("good", _prompt(0), SamplingParams(max_tokens=2, ignore_eos=True))
        try:
            e.add_request("bad", _prompt(1), SamplingParams(max_tokens=2, temperature=1.0, seed=2**64))
            print(f"kind 4 ({mode}): seed=2**64 accepted")
        except Exception as ex:  # noqa: BLE001 - printed as the outcome
            print(f"kind 4 ({mode}): seed=2**64 refused: {type(ex).__name__}: {ex}")
        outs = []
        for _ in range(6):
            try:
                outs += [(o.request_id, o.finish_reason) for o in e.step()]
            except Exception as ex:  # noqa: BLE001 - printed as the outcome
                print(f"kind 4 ({mode}): step raised {type(ex).__name__}: {str(ex)[:120]}")
                if mode == "mp":
                    break
            if not e.has_unfinished_requests():
                break
        left = ""
        if mode == "inproc":
            s = e.scheduler
            kv = s.kv_cache_manager
            left = (f"; unfinished {[(r.request_id, r.status.name) for r in s.running + list(s.waiting)]}, "
                    f"{kv.block_pool.num_gpu_blocks - 1 - kv.get_num_free_blocks()} KV blocks held")
        print(f"kind 4 ({mode}): finished {outs}{left}")
        e.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default="1,2,4")
    torch.set_num_threads(1)
    for k in ap.parse_args().kinds.split(","):
        {"1": kind1, "2": kind2, "4": kind4}[k.strip()]()


if __name__ == "__main__":
    main()
