"""Sampling (vLLM ``vllm/v1/sample/``)."""
