"""Side interpreters with real vLLM: one venv per release under the cache folder, its period
pins from pins.tsv; and the probe run in one of them (or in a contributor's own interpreter).

A venv is 7.9-11 GB (the wheel's pinned CUDA torch): ``create`` refuses before installing when
the disk has less than NEED_BYTES free, and ``remove_others`` keeps one at a time.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterator, Optional

from refimpl.errors import ConfigError

NEED_BYTES = 12 * 10**9  # the largest venv seen (11 GB) and pip's unpacking room
PROBE = Path(__file__).with_name("probe.py")


def cache_dir() -> Path:
    return Path(os.environ.get("REFIMPL_CONFORM_CACHE", Path.home() / ".cache" / "refimpl" / "conform"))


@dataclass(frozen=True)
class Pins:
    vllm: str
    transformers: str
    tokenizers: str
    huggingface_hub: str
    python: str
    source: str

    def requirements(self) -> list[str]:
        return [f"vllm=={self.vllm}", f"transformers=={self.transformers}", f"tokenizers=={self.tokenizers}",
                f"huggingface-hub=={self.huggingface_hub}"]


def pins_table() -> dict[str, Pins]:
    """pins.tsv: one line per release."""
    text = resources.files("refimpl.lab.conform").joinpath("pins.tsv").read_text()
    rows = [ln.split("\t") for ln in text.splitlines() if ln and not ln.startswith("#")]
    return {r[0]: Pins(*r) for r in rows[1:]}


def get_pins(version: str) -> Pins:
    table = pins_table()
    if version not in table:
        raise ConfigError("vllm", tuple(table), f"no period pins for vLLM {version!r} (add a line to "
                          "refimpl/lab/conform/pins.tsv, or give --vllm-python)")
    return table[version]


def venv_dir(version: str) -> Path:
    return cache_dir() / f"vllm-{version}"


def venv_python(version: str) -> Path:
    return venv_dir(version) / "bin" / "python"


def installed(version: str) -> bool:
    return (venv_dir(version) / ".refimpl-conform-installed").exists()


def check_disk(where: Path, need: int = NEED_BYTES) -> None:
    """Raises ConfigError("disk") naming the need when ``where`` has less than ``need`` bytes free."""
    where.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(where).free
    if free < need:
        raise ConfigError("disk", f">= {need / 1e9:.0f} GB free for a vLLM side venv",
                          f"{free / 1e9:.1f} GB free under {where}")


def remove_others(keep: str) -> list[str]:
    """Deletes every side venv but ``keep``'s; returns the versions removed."""
    gone = []
    for d in sorted(cache_dir().glob("vllm-*")):
        if d.is_dir() and d.name != f"vllm-{keep}":
            shutil.rmtree(d)
            gone.append(d.name)
    return gone


def remove(version: str) -> None:
    shutil.rmtree(venv_dir(version), ignore_errors=True)


def create(version: str, python: Optional[str] = None, log=print) -> dict:
    """The side venv of ``version`` with its pins (reused when complete): {seconds, bytes, log}.
    Raises ConfigError for a version without pins or a short disk (before installing), and
    RuntimeError naming the log when pip fails."""
    pins = get_pins(version)
    d = venv_dir(version)
    if installed(version):  # the install's own time and size, kept in the marker
        first = json.loads((d / ".refimpl-conform-installed").read_text()).get("install", {})
        return {"seconds": 0.0, "bytes": du(d), "reused": True, "log": str(d) + ".install.log",
                **({"install_seconds": first["seconds"], "install_bytes": first["bytes"]} if first else {})}
    check_disk(cache_dir())
    shutil.rmtree(d, ignore_errors=True)
    py = python or shutil.which(f"python{pins.python}") or sys.executable
    t0 = time.monotonic()
    subprocess.run([py, "-m", "venv", str(d)], check=True)
    logf = Path(str(d) + ".install.log")
    cmd = [str(d / "bin" / "pip"), "install", "--no-cache-dir", *pins.requirements()]
    log(f"installing {' '.join(pins.requirements())} into {d} (3-11 min, ~10 GB; log: {logf})")
    with open(logf, "w") as f, _progress(f"pip install vllm=={version}") as tick:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            f.write(line)
            if line.startswith(("Collecting", "Downloading", "Installing", "Successfully")):
                tick(line.strip()[:60])
        if proc.wait():
            raise RuntimeError(f"pip install for vLLM {version} failed (exit {proc.returncode}); see {logf}")
    done = {"seconds": time.monotonic() - t0, "bytes": du(d)}
    (d / ".refimpl-conform-installed").write_text(json.dumps({**pins.__dict__, "install": done}))
    return {**done, "reused": False, "log": str(logf)}


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


class _progress:
    """A tqdm bar without a total (pip's lines), or plain lines where tqdm is missing."""

    def __init__(self, desc: str, total: Optional[int] = None):
        from tqdm import tqdm
        self.bar = tqdm(total=total, desc=desc, unit="line" if total is None else "setting", file=sys.stderr)

    def __enter__(self):
        def tick(text: str = ""):
            self.bar.update(1)
            if text:
                self.bar.set_postfix_str(text, refresh=False)
        return tick

    def __exit__(self, *exc):
        self.bar.close()


def run_probe(python: str, spec_path: Path, total: int, env: Optional[dict] = None) -> Iterator[dict]:
    """The probe's JSON lines as they come (a progress bar over ``total`` settings). Ends the probe
    on KeyboardInterrupt after yielding what it had, then re-raises."""
    cmd = [python, str(PROBE), str(spec_path)]
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                "PYTHONWARNINGS": "ignore", **(env or {})}
    full_env.pop("PYTHONPATH", None)  # the probe sees only what that interpreter has
    errf = spec_path.with_suffix(".stderr")
    with open(errf, "w") as err, _progress("probe", total) as tick:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=full_env)
        assert proc.stdout is not None
        try:
            for raw in proc.stdout:
                line = json.loads(raw)
                if line.get("kind") in ("qwen", "whisper"):
                    tick(line["setting"]["id"])
                yield line
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait()
            raise
        if proc.wait():
            tail = errf.read_text().strip().splitlines()[-5:]
            raise RuntimeError(f"the probe exited {proc.returncode}: " + " | ".join(tail))
