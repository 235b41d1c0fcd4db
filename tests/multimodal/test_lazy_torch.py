"""Issue 44: the modules the explorer page reaches import no torch. ``is_tensor`` answers without
importing it, ``refimpl.multimodal``'s names load on first use, the hasher's tables have a torch-free
home, and ``this_machine`` asks torch about a GPU only where a GPU driver's device node exists."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import refimpl.multimodal as mm
from refimpl.lab import env
from refimpl.multimodal import hash_paths, hasher
from refimpl.utils.lazy_torch import is_tensor


def _fresh(code: str) -> None:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.parametrize("x, expected", [(torch.zeros(2), True), (torch.zeros(0, dtype=torch.uint8), True),
                                         (torch.nn.Parameter(torch.zeros(1)), True), (np.zeros(2), False),
                                         ([1.0], False), (None, False), (3, False)])
def test_is_tensor_is_isinstance_of_torch_tensor(x, expected):
    assert is_tensor(x) is expected is isinstance(x, torch.Tensor)


def test_is_tensor_answers_without_importing_torch():
    _fresh("import sys, numpy as np\nfrom refimpl.utils.lazy_torch import is_tensor\n"
           "assert not is_tensor(np.zeros(2)) and not is_tensor([1])\nassert 'torch' not in sys.modules")


def test_the_multimodal_packages_names_load_on_first_use():
    _fresh("import sys\nimport refimpl.multimodal as mm\n"
           "assert 'refimpl.multimodal.cache' not in sys.modules and 'torch' not in sys.modules\n"
           "from refimpl.multimodal import ProcessingCache\nimport refimpl.multimodal.cache as c\n"
           "assert ProcessingCache is c.ProcessingCache")


@pytest.mark.parametrize("name", mm.__all__)
def test_every_name_of_the_multimodal_package_is_its_submodules(name):
    import importlib
    assert getattr(mm, name) is getattr(importlib.import_module(f"refimpl.multimodal.{mm._HOME[name]}"), name)
    assert name in dir(mm)


def test_an_unknown_name_of_the_multimodal_package_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        mm.no_such_name  # noqa: B018


def test_the_hashers_tables_are_the_torch_free_modules():
    assert hasher.BYTE_PATHS is hash_paths.BYTE_PATHS and hasher.HASH_COPIES is hash_paths.HASH_COPIES


def test_this_machine_asks_torch_about_a_gpu_only_where_a_driver_node_exists(monkeypatch, tmp_path):
    monkeypatch.setattr(env, "GPU_DEVICE_NODES", (str(tmp_path / "nvidiactl"),))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H100 80GB HBM3")
    assert not env.gpu_device_node() and env.this_machine()["gpu"] is None  # no node: torch not asked
    (tmp_path / "nvidiactl").touch()
    assert env.gpu_device_node()
    assert env.hardware_folder(env.this_machine()) == "gpu-nvidia-h100-80gb-hbm3"
