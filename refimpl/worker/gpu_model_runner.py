"""GPUModelRunner: model loading, profile run, KV-cache sizing, CUDA-graph capture, execution.

Mirrors ``vllm/v1/worker/gpu_model_runner.py`` and the KV sizing of ``gpu_worker.py``, per
start-up row for the profile run, 0.10.2 for Whisper serving. On CPU the KV cache gets
``kv_cache_memory_bytes`` and the peak is the sampled RSS. Left out: decoder-only serving, CUDA
graphs, sampler warm-up, LoRA, pipeline parallelism, KV connectors, the encoder cache.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from refimpl.attention.cross_attention import dense_copy_bytes
from refimpl.core.kv_cache_utils import (
    blocks_for_one_request,
    kv_bytes_per_block,
    kv_cache_shape,
    kv_check_encoder_len_reads,
)
from refimpl.errors import ConfigError, EngineStateError
from refimpl.multimodal.encoder_budget import MultiModalBudget
from refimpl.utils.mem_utils import RssPeakSampler
from refimpl.utils.timing import device_timer
from refimpl.variants import StartupVariant, get_startup_variant
from refimpl.worker.model_loader import get_model
from refimpl.worker.whisper_runner import WhisperRunner

_VISION_KEYS = {  # modality -> (features key, grid key)
    "image": ("pixel_values", "image_grid_thw"),
    "video": ("pixel_values_videos", "video_grid_thw"),
}


def _item_tensors(dummy, modality: str) -> dict[str, torch.Tensor]:
    """The first ``modality`` item's tensors of a ``DummyDecoderData``, keyed as the HF
    processor keys them (the grid cut to the first item's row)."""
    data = dummy.multi_modal_data[modality][0]
    if modality == "audio":
        return {"input_features": data["input_features"]}
    feat_key, grid_key = _VISION_KEYS[modality]
    return {feat_key: data[feat_key], grid_key: data[grid_key].reshape(-1, 3)[:1]}


class GPUModelRunner:
    """Owns the model, the KV cache, the MultiModalBudget and (Whisper) the WhisperRunner; along
    start-up it sets ``peak_memory_bytes``, ``kv_caches``.

    ``variant``: the start-up row whose ``mm_budget`` (refimpl.multimodal.encoder_budget) it builds
    here, as vLLM's runner does (the lookup is pass #1); None: no budget yet (``profile_run`` builds
    one; the KV arithmetic needs none)."""

    def __init__(self, vllm_config, mm_registry=None, *, variant: StartupVariant | str | None = None):
        self.vllm_config = vllm_config
        vllm_config.use_mm_registry(mm_registry)
        self.model_config, self.scheduler_config = vllm_config.model_config, vllm_config.scheduler_config
        self.cache_config = vllm_config.cache_config
        self.device = torch.device(vllm_config.device)
        self.dtype = getattr(torch, self.model_config.dtype)
        self.model: Any = None  # a transformers model once load_model() ran
        self.mm_budget: Optional[MultiModalBudget] = None
        if variant is not None and self.mm_registry.supports_multimodal_inputs(self.model_config):
            self.mm_budget = MultiModalBudget(self.model_config, self.scheduler_config, self.mm_registry, variant)
        self.peak_memory_bytes = 0
        self.profile_modality: Optional[str] = None
        self.profile_mm_items = self.profile_encoder_tokens = self.profile_tokens_per_item = 0
        self.profile_encoder_forward_s = 0.0  # the profile run's encoder forward alone (s)
        self.kv_caches: list[torch.Tensor] = []
        self.whisper_runner: Optional[WhisperRunner] = None
        self.step_timings: dict[str, float] = {"prepare": 0.0, "model": 0.0, "sample": 0.0}

    def load_model(self) -> None:
        """Build the model (random weights, or a local HF directory) on the device."""
        self.model = get_model(self.model_config)

    # ---------------------------------------------------------------- profiling
    @property
    def mm_registry(self):
        return self.vllm_config.get_mm_registry()

    @property
    def max_tokens_per_item(self) -> dict[str, int]:
        """The budget's max tokens per item of the enabled modalities ({} without a budget)."""
        return dict(self.mm_budget.mm_max_toks_per_item) if self.mm_budget else {}

    @property
    def encoder_compute_budget(self) -> Optional[int]:
        return self.mm_budget.encoder_compute_budget if self.mm_budget else None

    @property
    def encoder_cache_size(self) -> Optional[int]:
        return self.mm_budget.encoder_cache_size if self.mm_budget else None

    @torch.inference_mode()
    def _run_encoder(self, modality: str, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        m = self.model
        feats = {k: v.to(self.device) for k, v in batch.items()}
        if modality == "audio":
            return m.model.encoder(feats["input_features"].to(self.dtype)).last_hidden_state
        key, grid = _VISION_KEYS[modality]
        fn = m.get_image_features if modality == "image" else m.get_video_features
        out = fn(feats[key].to(self.dtype), feats[grid])
        return torch.cat(list(out.pooler_output))

    def _profile_encoder(self, disable_cache: bool, use_formula: bool,
                         v: StartupVariant) -> Optional[torch.Tensor]:
        mc, reg = self.model_config, self.mm_registry
        if self.mm_budget is None:  # a runner built without a row: the lookup runs here
            if not reg.supports_multimodal_inputs(mc):
                return None
            self.mm_budget = MultiModalBudget(mc, self.scheduler_config, reg, v, disable_cache=disable_cache,
                                              use_formula=use_formula)
        elif v.profile_run_lookup:  # #2 until 0.10.0: the same lookup again
            self.mm_budget.lookup("profile_run", disable_cache=disable_cache, use_formula=use_formula)
        budget, item_spec = self.mm_budget, self.mm_budget.profile_item
        if item_spec is None:
            return None
        modality, n = item_spec.modality, item_spec.items
        # Sized as the row did: at max_num_batched_tokens (until 0.10.2), max_model_len (#25553),
        # or with the frames the lookup fitted, i.e. at the per-item maximum (ours).
        dummy = reg.get_decoder_dummy_data(mc, seq_len=item_spec.seq_len, mm_counts={modality: 1},
                                           disable_cache=disable_cache, fit_counts=budget.profile_fit_counts)
        item = _item_tensors(dummy, modality)
        if modality == "audio":
            batch = {"input_features": item["input_features"].reshape(1, *item["input_features"].shape[-2:])
                     .expand(n, -1, -1)}
        else:
            batch = {k: torch.cat([t] * n) for k, t in item.items()}
        with device_timer(self.device) as forward:
            out = self._run_encoder(modality, batch)
        self.profile_encoder_forward_s = forward.seconds
        self.profile_mm_items, self.profile_modality = n, modality
        self.profile_encoder_tokens = n * int(out.shape[-2]) if modality == "audio" else int(out.shape[0])
        self.profile_tokens_per_item = self.profile_encoder_tokens // n
        return out

    @torch.inference_mode()
    def _dummy_run(self, num_tokens: int) -> torch.Tensor:
        """Text forward of ``num_tokens`` dummy tokens over ``min(max_num_seqs, num_tokens)`` sequences,
        no KV cache (Whisper: no cross-attention); logits (num_seqs, vocab) of each last token."""
        m, cfg = self.model, self.model.config
        num_seqs = max(1, min(self.scheduler_config.max_num_seqs, num_tokens))
        seq_len = max(1, num_tokens // num_seqs)
        if self.model_config.is_encoder_decoder:
            seq_len = min(seq_len, cfg.max_target_positions)
            ids = torch.zeros(num_seqs, seq_len, dtype=torch.long, device=self.device)
            h = m.model.decoder(input_ids=ids, use_cache=False).last_hidden_state
            return m.proj_out(h[:, -1])
        ids = torch.zeros(num_seqs, seq_len, dtype=torch.long, device=self.device)
        h = m.model.language_model(input_ids=ids, use_cache=False).last_hidden_state
        return m.lm_head(h[:, -1])

    def profile_run(self, *, disable_cache: bool = False, use_formula: bool = False,
                    variant: StartupVariant | str = "refimpl") -> int:
        """Encode the worst-case item batch and run a text dummy run; the peak memory (bytes).

        The item is ``mm_budget.profile_item``, replicated to its ``items`` (``variant``: the start-up
        row of a runner built without one); ``disable_cache`` / ``use_formula`` go to the lookups. Sets
        ``peak_memory_bytes``, ``profile_tokens_per_item``. Raises EngineStateError before ``load_model``."""
        if self.model is None:
            raise EngineStateError("profile_run", "load_model() first", "no model loaded")
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        with RssPeakSampler() as rss:
            v = self.mm_budget.row if self.mm_budget else \
                get_startup_variant(variant) if isinstance(variant, str) else variant
            enc = self._profile_encoder(disable_cache, use_formula, v)
            del enc
            self._dummy_run(self.scheduler_config.max_num_batched_tokens)
            if cuda:
                torch.cuda.synchronize(self.device)
        if cuda:
            self.peak_memory_bytes = torch.cuda.max_memory_allocated(self.device)
            torch.cuda.empty_cache()
        else:
            self.peak_memory_bytes = rss.peak
        return self.peak_memory_bytes

    # ---------------------------------------------------------------- KV cache
    def get_kv_cache_shape(self) -> tuple[int, int, int]:
        """(num_layers, num_kv_heads, head_dim) of the KV cache (decoder layers for Whisper; the
        loaded model's config once there is one)."""
        if self.model_config.is_encoder_decoder and self.model is not None:
            return kv_cache_shape(self.model_config, self.model.config.to_dict())
        return kv_cache_shape(self.model_config)

    def bytes_per_block(self) -> int:
        """KV bytes one block takes over all layers: layers * 2 * block_size * heads * head_dim * itemsize."""
        return kv_bytes_per_block(self.model_config, self.cache_config.block_size, self.get_kv_cache_shape())

    def determine_available_memory(self) -> int:
        """Bytes for the KV cache: CPU ``kv_cache_memory_bytes``; CUDA ``gpu_memory_utilization * total``
        less the profile peak, non-torch memory and ``dense_copy_bytes`` (>= 0)."""
        if self.device.type != "cuda":
            return int(self.cache_config.kv_cache_memory_bytes)
        free, total = torch.cuda.mem_get_info(self.device)
        non_torch = max(0, (total - free) - torch.cuda.memory_reserved(self.device))
        peak = self.peak_memory_bytes or torch.cuda.max_memory_allocated(self.device)
        budget = int(total * self.cache_config.gpu_memory_utilization) - dense_copy_bytes(self.vllm_config)
        return max(0, budget - peak - non_torch)

    def kv_check_encoder_len_reads(self) -> int:
        """Encoder-length reads of the start-up KV check: one per cross-attention layer
        (``CrossAttentionSpec.max_memory_usage_bytes``) and one for the concurrency log; 0 without."""
        return kv_check_encoder_len_reads(self.model_config, self.get_kv_cache_shape())

    def determine_num_blocks(self) -> int:
        """KV blocks (``cache_config.num_gpu_blocks`` if set). Raises ConfigError when one request of
        ``max_model_len`` (with cross and null blocks) will not fit."""
        cc, mc = self.cache_config, self.model_config
        user_blocks = cc.num_gpu_blocks
        num = user_blocks or self.determine_available_memory() // self.bytes_per_block()
        # the start-up KV memory check: in vLLM 0.10.2 each read is a registry call
        enc = None
        for _ in range(self.kv_check_encoder_len_reads()):
            enc = self.vllm_config.get_encoder_len("kv_cache")
        need = blocks_for_one_request(self.vllm_config, enc)
        if num < need:  # name the setting the user gave, with its limit in its own unit
            what = f"{num} KV blocks cannot hold one request of max_model_len={mc.max_model_len} ({need} blocks)"
            if user_blocks:
                raise ConfigError("num_gpu_blocks", need, what)
            if self.device.type != "cuda":
                raise ConfigError("kv_cache_memory_bytes", need * self.bytes_per_block(), what)
            free, total = torch.cuda.mem_get_info(self.device)
            short = (need - num) * self.bytes_per_block()
            raise ConfigError("gpu_memory_utilization",
                              min(1.0, cc.gpu_memory_utilization + short / total), what)
        cc.num_gpu_blocks = num
        return num

    def initialize_kv_cache(self, num_blocks: int) -> None:
        """Allocate one (2, num_blocks, block_size, heads, head_dim) tensor per layer (zeros)."""
        layers, heads, head_dim = self.get_kv_cache_shape()
        shape = (2, num_blocks, self.cache_config.block_size, heads, head_dim)
        self.kv_caches = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(layers)]
        if self.model_config.is_encoder_decoder:
            self.whisper_runner = WhisperRunner(self.vllm_config, self.model, self.kv_caches,
                                                self.step_timings)

    def capture_model(self) -> int:
        """CUDA graphs of the decode step: not implemented (the paged path runs eagerly); returns 0."""
        return 0

    # ---------------------------------------------------------------- serving
    def execute_model(self, scheduler_output):
        """Run one SchedulerOutput; a ModelRunnerOutput. Raises EngineStateError before
        ``initialize_kv_cache``, NotImplementedError for decoder-only models."""
        if not self.model_config.is_encoder_decoder:
            raise NotImplementedError("serving decoder-only models is not implemented")
        if self.whisper_runner is None:
            raise EngineStateError("execute_model", "initialize_kv_cache() first", "no KV cache")
        return self.whisper_runner.execute_model(scheduler_output)
