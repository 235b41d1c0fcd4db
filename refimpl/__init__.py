"""refimpl: a reference implementation of the vLLM V1 pieces behind multimodal start-up
(PR #17935) and Whisper's encoder length (PRs #24866 / #24989). docs/architecture.md maps it.
"""
__version__ = "0.2.0"
