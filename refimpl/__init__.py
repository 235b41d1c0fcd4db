"""refimpl: a small, faithful reference implementation of the vLLM V1 pieces behind
vLLM PR #17935 (multimodal start-up: processing cache kept on during profiling, then
``reset_mm_cache``) and PRs #24866 / #24989 (Whisper: encoder length read from
``scheduler_config.max_num_encoder_input_tokens`` instead of the registry at run time).

See docs/architecture.md for where each mechanism lives.
"""
__version__ = "0.1.0"
