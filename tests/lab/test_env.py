"""refimpl.lab.env: what every result records about the machine (no timing assertions)."""
import json
import subprocess

import torch

from refimpl.lab.env import collect_env, git_info, reported_gib


def test_collect_env_fields():
    env = collect_env()
    hw = env["hardware"]
    assert hw["cpu"]["logical_cores"] >= 1 and hw["cpu"]["model"] and hw["ram_bytes"] > 0
    assert hw["name"] == (hw["gpu"]["name"] if hw["gpu"] else hw["cpu"]["model"])
    assert (hw["gpu"] is None) == (not torch.cuda.is_available())
    for k in ("python", "torch", "transformers", "tokenizers", "numpy", "refimpl"):
        assert k in env["versions"]
    assert env["versions"]["torch_runtime"] == torch.__version__
    assert env["torch_env"]["torch_version"] == torch.__version__  # from torch's collect_env
    assert "pip_packages" not in env["torch_env"]
    assert env["torch_num_threads"] == torch.get_num_threads()
    assert "T" in env["date"]
    assert set(env["git"]) == {"commit", "dirty"}
    reporting = hw["page_reporting"]  # None on a kernel without free page reporting (bare metal, say)
    assert reporting is None or ("page_reporting_order" in reporting and "reported_kib" not in reporting)
    json.dumps(env)  # serialisable as is


def test_collect_env_without_tools(monkeypatch, tmp_path):
    """A host without git, pip, conda, nvidia-smi or compilers on PATH still gets an env."""
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no executable found
    monkeypatch.delenv("CONDA_EXE", raising=False)
    env = collect_env()
    assert env["git"] == {"commit": None, "dirty": None}
    assert env["torch_env"]["gcc_version"] is None
    assert env["hardware"]["cpu"]["model"]


def test_git_info_dirty_flag(tmp_path):
    def git(*a):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=tmp_path,
                       check=True, capture_output=True)
    assert git_info(tmp_path) == {"commit": None, "dirty": None}  # not a checkout
    git("init", "-q")
    (tmp_path / "f").write_text("a")
    git("add", "f")
    git("commit", "-qm", "x")
    clean = git_info(tmp_path)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False
    (tmp_path / "f").write_text("b")
    assert git_info(tmp_path) == {"commit": clean["commit"], "dirty": True}


def test_reported_gib_counts_up_or_is_absent():
    """The free-page-reporting counter (GiB since boot) a start-up run's ``host_reported_gib`` differences."""
    a = reported_gib()
    b = reported_gib()
    assert (a is None and b is None) or (a is not None and b is not None and 0 <= a <= b)


def test_reporting_off_is_an_order_above_every_free_block():
    from refimpl.lab.env import REPORTING_OFF_ORDER, reporting_off
    assert not reporting_off(None) and not reporting_off({"page_reporting_order": "9"})
    assert reporting_off({"page_reporting_order": str(REPORTING_OFF_ORDER)})
