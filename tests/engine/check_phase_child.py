"""Run by tests/engine/test_dry_plan_imports.py in a fresh interpreter: the engine's memory check
(``check_startup_memory``, its check phase) of Qwen2.5-VL-3B at full scale on the CPU; prints which of
the modules the plan imported there until issue 44 are imported after it, as JSON (none now)."""
import json
import sys

from refimpl.config import ModelConfig, VllmConfig
from refimpl.engine.core import check_startup_memory
from refimpl.variants import get_startup_variant

WATCHED = ("refimpl.multimodal.qwen2_5_vl", "transformers.models.qwen2_5_vl.modeling_qwen2_5_vl")
before = [m for m in WATCHED if m in sys.modules]
check_startup_memory(VllmConfig(ModelConfig("qwen2.5-vl-3b", device="cpu", scale="full")), get_startup_variant("refimpl"))
print(json.dumps({"before": before, "after": [m for m in WATCHED if m in sys.modules]}))
