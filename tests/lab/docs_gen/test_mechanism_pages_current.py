"""The mechanism pages are what refimpl.lab.docs_gen.mechanism_pages writes today (the page checks are in tests/lab/docs_gen/test_mechanism_pages.py)."""
import pytest

from refimpl.lab.docs_gen import mechanism_pages as pages


@pytest.mark.slow  # builds the Qwen2.5-VL processor and whisper-large-v3's configs
def test_pages_are_up_to_date():
    assert pages.stale(pages.pages()) == [], "run python -m refimpl.lab.docs_gen.mechanism_pages"
