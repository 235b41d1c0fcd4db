"""Attention (vLLM ``vllm/attention/``, ``vllm/v1/attention/backends/``): paged attention and
cross-attention metadata.
"""
