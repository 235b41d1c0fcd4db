"""The refusals of ``refimpl bench serve``'s values that depend on the model and on each other
(called by guard.check after the per-field ranges): output lengths within Whisper's positions, the
variants a design takes, and the closed loop's concurrency C and output length L (issue 42)."""
from __future__ import annotations

from refimpl.config import ModelConfig, get_config_dict
from refimpl.errors import ConfigError, UnknownModelError
from refimpl.lab.bench.specs import HF, ServeSpec

__all__ = ["max_tokens_limit", "check_max_tokens", "check_serve"]


def max_tokens_limit(model: str) -> int:
    """Whisper decodes at most max_target_positions (448) minus its decoder prompt (tokens)."""
    from refimpl.tokenizer import WHISPER_EN_PROMPT_TOKENS, WHISPER_PROMPT_TOKENS  # transformers: on use

    prompt = WHISPER_EN_PROMPT_TOKENS if model.endswith(".en") else WHISPER_PROMPT_TOKENS
    return get_config_dict(model)["max_target_positions"] - len(prompt)


def check_max_tokens(field: str, value: int, model: str) -> None:
    """ConfigError(``field``) beyond ``max_tokens_limit(model)``."""
    limit = max_tokens_limit(model)
    if value > limit:
        raise ConfigError(field, f"<= {limit} for {model}", f"got {value}")


def check_serve(spec: ServeSpec, s: ServeSpec) -> None:
    """``spec`` as given, ``s`` resolved. The closed loop: 1 <= C <= min(max_num_seqs, num_requests)
    (every request in flight fits one batch, and the first batch is full), no ``rate`` with C;
    1 <= L <= ``max_tokens_limit``, ``max_tokens`` unset or L. Raises ConfigError naming the field."""
    assert s.model is not None and s.variants is not None and s.max_tokens is not None
    if not ModelConfig(s.model, device="cpu").is_encoder_decoder:
        raise UnknownModelError("model", "a Whisper model", f"refimpl bench serve serves Whisper, got {s.model}")
    if s.output_len is not None:
        check_max_tokens("output_len", s.output_len, s.model)
        if spec.max_tokens is not None and spec.max_tokens != s.output_len:
            raise ConfigError("max_tokens", f"unset or = output_len ({s.output_len})", f"got {spec.max_tokens}")
    check_max_tokens("max_tokens", s.max_tokens, s.model)
    if s.max_concurrency is not None:
        assert s.max_num_seqs is not None and s.num_requests is not None
        limit = min(s.max_num_seqs, s.num_requests)
        if s.max_concurrency > limit:
            raise ConfigError("max_concurrency", f"<= {limit} (max_num_seqs {s.max_num_seqs}, num_requests "
                              f"{s.num_requests})", f"got {s.max_concurrency}")
        if s.rate is not None:
            raise ConfigError("rate", "unset with max_concurrency (a closed loop has no arrivals)", f"got {s.rate}")
    engines = [v for v in s.variants if v != HF]
    if s.design == "paired" and (len(s.variants) < 2 or HF in s.variants):
        raise ConfigError("variants", "two or more engine variants with design paired", f"got {' '.join(s.variants)}")
    if s.design == "workload" and len(engines) > 1:
        raise ConfigError("variants", "one engine variant (and hf-generate) with design workload",
                          f"got {' '.join(s.variants)}")
