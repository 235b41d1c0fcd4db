"""Test support shipped with the kit: the bad-input case table (``bad_inputs``) shared by
``scripts/make_reliability_table.py`` and ``tests/test_bad_inputs.py``."""
