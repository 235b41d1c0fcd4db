"""``refimpl conform``: run the kit's probe in real vLLM and check the rows against it.

``--vllm X``: a side venv with vLLM X and its period pins (created, or reused); ``--vllm-python
PATH``: an interpreter that already has vLLM (a release, or your own build). Writes
``results/conformance/vllm-<version>/probe.jsonl`` (the probe's lines, as they come: a partial
file on Ctrl-C) and ``summary.json`` beside it (a folder per run: ``results/*/*.json`` are the
benches' Results); prints field by field ``equal on N of M``. Exit 1 on a
difference that is not a known one (KNOWN in compare.py), 2 on bad input.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import tyro

from refimpl.errors import ConfigError, RefimplError
from refimpl.lab.cli_errors import flags, refuse
from refimpl.lab.conform import compare as C
from refimpl.lab.conform import memory, side
from refimpl.lab.conform.grid import probe_spec
from refimpl.lab.conform.table import summary_md, write_docs_table

BIGMEM_LOCK = "/tmp/refimpl-bigmem.lock"  # 0.9.0's 128k lookup-only setting peaks near 18 GB
MEMORY_WAIT_S = 900  # how long the probe waits, per setting, for its predicted peak to be available
PROG = "refimpl conform"


@dataclass(frozen=True)
class ConformArgs:
    """Run the kit's probe in real vLLM and check the rows against it (docs/conformance.md). Exactly one
    of --vllm, --vllm-python, --from-jsonl, --table."""
    vllm: Optional[str] = None  # a release with a line in refimpl/lab/conform/pins.tsv (e.g. 0.11.0)
    vllm_python: Optional[str] = None  # an interpreter where vLLM is installed (your build)
    from_jsonl: Optional[str] = None  # compare recorded probe lines (a results/conformance/*/probe.jsonl)
    table: bool = False  # only rewrite docs/conformance.md's table from the committed summary.json files
    row: Annotated[Optional[str], tyro.conf.arg(help="the row to check against", help_behavior_hint=(
        "(default: the release's; every row for an unknown version, naming the nearest)"))] = None
    keep: bool = False  # keep the other side venvs too (without it: one side venv at a time)
    remove_after: bool = False  # delete this release's side venv after the probe
    quick: bool = False  # max_model_len 4096 only (24 settings)
    no_lock: Annotated[tyro.conf.FlagCreatePairsOff[bool], tyro.conf.arg(help=(
        f"run the probe without waiting for {BIGMEM_LOCK} (releases that build no int64 dummy video at "
        "max_model_len peak far lower than 0.11.0)"))] = False
    out: str = "results/conformance"  # folder for the probe lines and summary


WHO = ("vllm", "vllm_python", "from_jsonl", "table")


def check(a: ConformArgs) -> None:
    """Refuse ``a`` before anything runs: exactly one of WHO (ConfigError naming ``vllm``)."""
    given = [f"--{w.replace('_', '-')}" for w in WHO if getattr(a, w) not in (None, False)]
    if len(given) != 1:
        raise ConfigError("vllm", "exactly one of --vllm, --vllm-python, --from-jsonl, --table",
                          f"got {' '.join(given) or 'none'}")


def parse(argv: Optional[list[str]]) -> ConformArgs:
    """The flags of ``refimpl conform``, checked; ConfigError naming the field; ``--help`` exits 0."""
    a = flags(ConformArgs, argv, PROG)
    check(a)
    return a


def _check(lines: list[dict], row: Optional[str]) -> dict:
    meta = next((ln for ln in lines if ln.get("kind") == "meta"), {})
    version = meta.get("vllm") or "unknown"
    rows = C.release_rows()
    ranking = C.nearest(lines, rows)
    target = row or (version if version in rows else ranking[0][0] if ranking else None)
    failed = C.unprobed(lines)
    tally: dict[str, list[int]] = {}
    if target is None:  # nothing probed and no row of its own: no row is named
        diffs = [C.Diff(ln["setting"]["id"], "setup", C.flatten(ln).get("setup"), None)
                            for ln in lines if ln.get("kind") in ("qwen", "whisper")]
    else:
        tally, diffs = C.compare(lines, target)
    return {"meta": meta, "row": target, "unprobed": failed, "startup_row": target and C.startup_row(target), "row_given": bool(row) or version in rows,
            "complete": any(ln.get("kind") == "end" for ln in lines),
            "settings": sum(ln.get("kind") in ("qwen", "whisper") for ln in lines),
            "tally": tally, "differences": [d.__dict__ for d in diffs],
            "failures": len(C.failures(diffs)),
            "nearest": [{"row": r, "settings_failing": n, "settings_differing": m} for r, n, m in ranking],
            "known": {k.name: k.reason for k in C.KNOWN if any(d.known == k.name for d in diffs)},
            "rss_by_setting": {ln["setting"]["id"]: ln["rss"]["peak_bytes"] for ln in lines if "rss" in ln}}


def main(argv: Optional[list[str]] = None) -> int:
    """``refimpl conform ...``: 0; 1 on a difference that is not a known one or an unfinished probe; 2 on a
    refusal (one line)."""
    try:
        a = parse(argv)
    except RefimplError as e:
        return refuse(PROG, e)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    info: dict = {}
    try:
        if a.table:
            write_docs_table()
            print("wrote the table of docs/conformance.md")
            return 0
        if a.from_jsonl:
            src = Path(a.from_jsonl)
            lines = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
            dest = out / (src.parent.name if src.name == "probe.jsonl" else src.stem)
            old = dest / "summary.json"  # keep the run's time and disk
            info = json.loads(old.read_text()).get("run", {}) if old.exists() else {}
            return _report(_check(lines, a.row), info, dest)
        spec = probe_spec(side.cache_dir() / "models", quick=a.quick)
        row = C.startup_row(a.vllm or C.release_rows()[-1])  # a build of unknown version: the newest row's
        predicted = memory.check_grid(spec["qwen"] + spec["whisper"], row)  # refuses before installing
        top = max(predicted, key=lambda k: predicted[k])
        info["predicted_peak"] = {"row": row, "setting": top, "bytes": predicted[top], "by_setting": predicted}
        if a.vllm:
            side.get_pins(a.vllm)
            if not a.keep:
                for gone in side.remove_others(a.vllm):
                    print(f"removed the side venv {gone} (one at a time; --keep keeps them)", file=sys.stderr)
            info["install"] = side.create(a.vllm)
            python = str(side.venv_python(a.vllm))
        else:
            python = str(a.vllm_python)
            if not Path(python).exists():
                raise ConfigError("vllm_python", "an existing interpreter", f"no file at {python}")
        name = a.vllm or "python-" + str(abs(hash(python)) % 10**6)
        total = len(spec["qwen"]) + len(spec["whisper"])
        run_dir = out / f"vllm-{name}"
        run_dir.mkdir(parents=True, exist_ok=True)
        jsonl = run_dir / "probe.jsonl"
        lines = []
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp, (contextlib.nullcontext() if a.no_lock else _bigmem_lock()):
            info["lock_wait_seconds"], t0 = time.monotonic() - t0, time.monotonic()  # the probe's time: after the lock
            spec_path = Path(tmp) / "spec.json"  # the probe waits before each setting for its predicted peak
            spec_path.write_text(json.dumps({**spec, "predicted_peak": predicted, "memory_wait_s": MEMORY_WAIT_S}))
            with open(jsonl, "w") as f:
                try:
                    for line in side.run_probe(python, spec_path, total):
                        f.write(json.dumps(line) + "\n")
                        f.flush()
                        lines.append(line)
                except KeyboardInterrupt:
                    print(f"\ninterrupted: the {len(lines) - 1} settings probed are in {jsonl}", file=sys.stderr)
        info["probe_seconds"] = time.monotonic() - t0
        info["probe_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        if not a.vllm:  # name the file by the version the build reports
            version = next((ln.get("vllm") for ln in lines if ln.get("kind") == "meta"), None) or name
            named = out / f"vllm-{version}-python"
            if named.exists():
                shutil.rmtree(named)
            run_dir.rename(named)
            run_dir = named
        result = _check(lines, a.row)
        if a.vllm and a.remove_after:
            side.remove(a.vllm)
        return _report(result, info, run_dir)
    except RefimplError as e:
        return refuse(PROG, e)


@contextlib.contextmanager
def _bigmem_lock():
    with open(BIGMEM_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _report(result: dict, info: dict, run_dir: Path) -> int:
    result["run"] = info
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        summary = run_dir / "summary.json"
        summary.write_text(json.dumps(result, indent=1, default=str) + "\n")
        print(f"wrote {summary}")
    print(summary_md(result))
    return 1 if result["failures"] or not result["complete"] else 0


if __name__ == "__main__":
    sys.exit(main())
