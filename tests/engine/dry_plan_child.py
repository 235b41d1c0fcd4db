"""Run by tests/engine/test_dry_plan_imports.py in a fresh interpreter: the start-up plan of every
shipped model under every start-up row at full scale, then the explorer page's first answer (its first
two cells); prints which of transformers' modules and torchvision were imported, as JSON."""
import json
import sys

from refimpl.config import ModelConfig, VllmConfig
from refimpl.config.model import SUPPORTED_MODELS
from refimpl.engine.startup_plan import StartupPlan
from refimpl.variants import STARTUP_VARIANTS

for model in SUPPORTED_MODELS:
    for row in STARTUP_VARIANTS:
        StartupPlan.build(VllmConfig(ModelConfig(model, device="cpu")), row)
from refimpl.lab.explore.explorer_panels import ExploreStudy  # noqa: E402 - after the plans, on purpose

ExploreStudy("stored", None, "../reports/latest", None).explorer()
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("transformers", "torchvision"))))
