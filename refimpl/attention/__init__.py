"""Attention (vLLM ``vllm/attention/`` and ``vllm/v1/attention/backends/``): paged attention on
a block-table KV cache, and the cross-attention metadata of encoder-decoder models."""
