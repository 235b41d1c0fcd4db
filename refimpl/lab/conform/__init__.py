"""Conformance against real vLLM: ``refimpl conform`` runs the kit's probe (probe.py) in an
interpreter with a vLLM release or a contributor's build, over the grid (grid.py), and compares
every field with the oracles of the matching row (compare.py). docs/conformance.md."""
