"""The mechanism pages are what scripts/make_mechanism_pages.py writes today (the page checks are in tests/core/test_mechanism_pages.py)."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("make_mechanism_pages", ROOT / "scripts" / "make_mechanism_pages.py")
pages = importlib.util.module_from_spec(_spec)
sys.modules["make_mechanism_pages"] = pages  # dataclasses look their module up
_spec.loader.exec_module(pages)


@pytest.mark.slow  # builds the Qwen2.5-VL processor and whisper-large-v3's configs
def test_pages_are_up_to_date():
    assert pages.stale(pages.pages()) == [], "run python scripts/make_mechanism_pages.py"
