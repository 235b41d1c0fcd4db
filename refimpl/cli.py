"""Command line: ``refimpl bench startup|budget|throughput ...`` and ``refimpl report``.

Each ``bench`` subcommand is one module under ``refimpl/bench`` (one question per module, as
vLLM's ``benchmarks/``); its flags are documented by ``refimpl bench NAME --help``. A setting
out of its limits (refimpl's ConfigError, raised by the bench's spec before anything runs),
or a run the machine's memory cannot hold (InsufficientMemoryError, from the bench's memory
check before the runs), is printed as one line naming the field and the limit, and the command
exits 2, as argparse does for a malformed flag.
"""
from __future__ import annotations

import importlib
import sys
import textwrap

from refimpl.variants import ENCODER_LEN_VARIANTS, STARTUP_VARIANTS


def _variants(names) -> str:
    """``a | b | c`` on lines of their own, indented to the usage text's description column."""
    return textwrap.fill(" | ".join(names), 96, initial_indent=" " * 20, subsequent_indent=" " * 20)


BENCHES = ("startup", "budget", "throughput", "wer", "workload", "paired")
USAGE = f"""usage: refimpl bench {{{','.join(BENCHES)}}} [options] --output-json PATH
       refimpl report [--quick] [--device auto|cpu|cuda]

  bench startup     engine start-up per phase; variants:
{_variants(STARTUP_VARIANTS)}
  bench budget      N successive compute_encoder_budget calls in one fresh process
  bench throughput  Whisper serving; variants (audios-per-step: --max-audios-per-step N):
{_variants(ENCODER_LEN_VARIANTS)}
  bench wer         word error rate of the real whisper-tiny.en weights on the speech clips
  bench workload    EOS-stopping requests, mixed lengths, all-at-once or Poisson arrivals; TTFT, E2E
  bench paired      variants in one process on identical blocks, A B B A; gains with 95% CIs
  report            run every notebook headless and write reports/latest/
A variant's vLLM version or PR: refimpl/variants.py; all flags: refimpl bench NAME --help.
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "bench":
        if not rest or rest[0] not in BENCHES:
            print(USAGE, file=sys.stderr)
            return 2
        from refimpl.errors import ConfigError, InsufficientMemoryError
        try:
            return importlib.import_module(f"refimpl.bench.{rest[0]}").main(rest[1:]) or 0
        except (ConfigError, InsufficientMemoryError) as e:
            print(f"refimpl bench {rest[0]}: error: {e}", file=sys.stderr)
            return 2
    if cmd == "report":
        from refimpl.report import main as report_main
        return report_main(rest) or 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
