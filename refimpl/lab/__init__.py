"""The measuring half: benches (bench/), the notebooks' studies (studies/), the explorer and the cost
model (explore/), conformance against real vLLM (conform/), report, stats, env and the CLI. Needs
the [lab] extra; the mechanism and refimpl.testing never import it (tests/test_import_contract.py)."""
