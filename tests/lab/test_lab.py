"""`make lab` starts JupyterLab at the repository root (as root too): it serves the notebooks and
the executed reports under reports/.

Starts the server through the Makefile's own recipe on a free port of 127.0.0.1 with a token,
lists the root and notebooks/ through the REST API (GET /api/contents), and stops it. Most of the time is
the server's start-up (4-6 s on the quiet 2-core machine, more under load); bounded by
DEADLINE_S.
"""
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 60.0  # a failure bound, not a timing assertion


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_lab_serves_the_notebooks(tmp_path):
    venv = Path(sys.executable).parent.parent
    if not (venv / "bin" / "jupyter").exists():
        pytest.skip("jupyter is not installed in this interpreter's environment")
    port, token = free_port(), secrets.token_hex(16)
    # server extensions the REST check does not need are off: a third less start-up time
    no_ext = " ".join(f"--ServerApp.jpserver_extensions {e}=False"
                      for e in ("jupyter_lsp", "jupyter_server_terminals", "notebook_shim"))
    flags = f"--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token={token} {no_ext}"
    stamp = f"{venv}/.refimpl-installed"  # -o: never (re)install the venv from this test
    proc = subprocess.Popen(
        ["make", "-s", "-C", str(ROOT), "-o", stamp, f"VENV={venv}", "lab", f"LAB_FLAGS={flags}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path)})
    def get(path: str):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/{path}?token={token}", timeout=2) as r:
            return json.load(r)
    root = listing = None
    try:
        t_end = time.monotonic() + DEADLINE_S
        while listing is None and time.monotonic() < t_end and proc.poll() is None:
            try:
                root, listing = get(""), get("notebooks")
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # make, its shell and jupyter: our own group
        try:
            out, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
    assert listing is not None, f"no answer from the server; its output:\n{out[-3000:]}"
    assert {"notebooks", "results"} <= {item["name"] for item in root["content"]}  # reports/ too, once written
    names = {item["name"] for item in listing["content"]}
    expected = {p.name for p in (ROOT / "notebooks").glob("[0-9]*.ipynb")}
    assert expected and expected <= names
