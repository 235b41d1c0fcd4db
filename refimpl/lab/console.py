"""The ``refimpl`` console script: the measuring half's command line (refimpl/lab/cli.py), which
needs the lab extra. Without it, one line says what to install (exit 2) instead of a
traceback from the first missing import."""
from __future__ import annotations

import importlib.util
import sys

# What the benches, the report and the CLI import beyond the core install (pyproject [lab])
LAB_MODULES = ("matplotlib", "papermill", "jiwer", "tyro")


def main() -> int:
    missing = [m for m in LAB_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        print(f"refimpl: the refimpl command needs the lab extra (missing: {', '.join(missing)}): "
              "pip install 'refimpl[lab]'", file=sys.stderr)
        return 2
    from refimpl.lab.cli import main as cli_main  # optional: after the check, cli imports the [lab] extra
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
