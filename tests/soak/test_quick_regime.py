"""QUICK measures where the full run's finding holds: twice, at the setting ``quick_setting`` chose from
committed fresh-process ladders, the quick start-up gives 0.9.0 slower than 0.8.5, as the committed 128k run does (two fresh
processes a side each time; the direction is checked, not a value)."""
import pytest

from refimpl.lab.studies.startup import AFTER, BEFORE, StartupStudy, regime

pytestmark = pytest.mark.soak


def test_quick_start_up_shows_the_finding_s_direction_twice(tmp_path):
    for i in range(2):
        s = StartupStudy(mode="quick", out_dir=tmp_path / str(i))
        s.variants = (BEFORE, AFTER)  # the finding's two rows; the other quick rows do not bear on it
        r = regime(s.startup(), s.hardware)
        assert r["committed"]["held"] and r["full"]["estimate"] > 1
        assert r["measured"]["estimate"] > 1, (i, r["measured"], r["size"])
