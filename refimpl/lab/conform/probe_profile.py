"""The conformance probe's stand-ins for the release's profile run (probe.py, beside it, imports this
file by its folder: both run INSIDE vLLM's interpreter and import nothing of refimpl): HF-processor
pass counters, a recording registry, and the stub model and runner that ``GPUModelRunner.profile_run``
runs on until the encoder.
"""
from __future__ import annotations

import inspect


class StopAtEncoder(Exception):
    """Raised by the stub model at the encoder: the profile run stops there."""


def registry():
    from vllm.multimodal import MULTIMODAL_REGISTRY
    return MULTIMODAL_REGISTRY


# ----------------------------------------------------------------------------- counters
class Counters:
    """HF-processor calls (``Qwen2_5_VLProcessor.__call__``: ``passes`` with images or videos,
    ``text_only`` without), the release's ``ProcessingCache`` gets (hits, misses) and puts (stores;
    ``held``: items stored per modality since the last reset), and dummy-builder calls."""

    def __init__(self):
        self.passes = self.text_only = self.hits = self.misses = self.stores = 0
        self.held: dict[str, int] = {}
        self.raw: list[dict] = []
        self.recording = False

    def snapshot(self) -> dict:
        return {"hf_calls_with_items": self.passes, "hf_calls_text_only": self.text_only,
                "cache_hits": self.hits, "cache_misses": self.misses, "cache_stores": self.stores}

    def install(self):
        from transformers import Qwen2_5_VLProcessor
        call = Qwen2_5_VLProcessor.__call__
        counters = self

        sig = inspect.signature(call)

        def counted(proc, *a, **kw):  # a pass with images or videos (a text-only call is the tokenizer's)
            args = sig.bind(proc, *a, **kw).arguments
            if any(args.get(k) not in (None, [], {}) for k in ("images", "videos")):
                counters.passes += 1
            else:
                counters.text_only += 1
            return call(proc, *a, **kw)
        Qwen2_5_VLProcessor.__call__ = counted
        self._install_cache()
        from vllm.multimodal import profiling
        builder = profiling.BaseDummyInputsBuilder
        images, videos = builder._get_dummy_images, builder._get_dummy_videos
        static = isinstance(inspect.getattr_static(builder, "_get_dummy_images"), staticmethod)

        def rec_images(*a, **kw):
            out = images(*a, **kw)
            if counters.recording:
                counters.raw += [{"modality": "image", "shape": [im.size[1], im.size[0], len(im.getbands())],
                                  "dtype": "uint8"} for im in out]
            return out

        def rec_videos(*a, **kw):
            out = videos(*a, **kw)
            if counters.recording:
                counters.raw += [{"modality": "video", "shape": list(v.shape), "dtype": str(v.dtype)} for v in out]
            return out
        # static up to 0.10, methods from 0.11 (the wrapper passes self on)
        builder._get_dummy_images = staticmethod(rec_images) if static else rec_images
        builder._get_dummy_videos = staticmethod(rec_videos) if static else rec_videos


    def _install_cache(self):
        """Counts the release's ``ProcessingCache`` lookups (``get`` / ``get_item``: None a miss) and
        stores (``put`` / ``put_item``) by modality, and empties ``held`` on ``reset``
        (vllm/multimodal/processing.py, to 0.10.0; absent later: nothing counted)."""
        try:
            from vllm.multimodal.processing import ProcessingCache
        except ImportError:
            return
        counters, modality_of = self, {}

        def lookup(orig, hit_of):
            bind = inspect.signature(orig).bind

            def counted(cache, *a, **kw):
                out = orig(cache, *a, **kw)
                hit = hit_of(out) is not None
                counters.hits += hit
                counters.misses += not hit
                if hasattr(out, "key"):  # get_item: put_item gets the key back, not the modality
                    modality_of[out.key] = bind(cache, *a, **kw).arguments.get("modality", "?")
                return out
            return counted

        def store(orig, modality):
            def counted(cache, *a, **kw):
                m = modality(inspect.signature(orig).bind(cache, *a, **kw).arguments)
                counters.stores += 1
                counters.held[m] = counters.held.get(m, 0) + 1
                return orig(cache, *a, **kw)
            return counted

        def counted_reset(orig):
            def reset(cache, *a, **kw):
                counters.held.clear()
                return orig(cache, *a, **kw)
            return reset
        pc = ProcessingCache
        if hasattr(pc, "get"):
            pc.get = lookup(pc.get, lambda out: out)
        if hasattr(pc, "get_item"):
            pc.get_item = lookup(pc.get_item, lambda out: out.value)
        if hasattr(pc, "put"):
            pc.put = store(pc.put, lambda args: args.get("modality", "?"))
        if hasattr(pc, "put_item"):
            pc.put_item = store(pc.put_item, lambda args: modality_of.get(args["item"].key, "?"))
        if hasattr(pc, "reset"):
            pc.reset = counted_reset(pc.reset)


COUNTERS = Counters()


def cache_state() -> dict:
    """Entries (in all and per modality) and bytes the registry's processing cache holds now.
    Raises AttributeError where the release keeps no ``_processing_cache`` on the registry."""
    lru = registry()._processing_cache._cache
    return {"cache_entries": len(lru), "cache_bytes": int(lru.currsize),
            "cache_entries_by_modality": {m: n for m, n in sorted(COUNTERS.held.items()) if n}}


def release_reset(mc) -> bool:
    """The release's own ``reset_processor_cache`` (PR #17935, 0.9.0 on; what the engine's
    ``reset_mm_cache`` calls); False where it has none (0.8.5)."""
    reset = getattr(registry(), "reset_processor_cache", None)
    if reset is None:
        return False
    try:
        reset(mc)
    except TypeError:
        reset()
    return True


def empty_cache(mc) -> None:
    """A fresh process's empty cache: the release's reset, else the registry's LRU cleared (0.8.5
    keeps one, unused while profiling)."""
    if not release_reset(mc):
        cache = getattr(getattr(registry(), "_processing_cache", None), "_cache", None)
        if cache is not None:
            cache.clear()
    COUNTERS.held.clear()


# ----------------------------------------------------------------------------- profile run
class RecordingRegistry:
    """The real registry; ``get_decoder_dummy_data`` calls are recorded (seq_len, mm_counts)."""

    def __init__(self, real):
        self._real, self.calls = real, []

    def get_decoder_dummy_data(self, *a, **kw):
        sig = inspect.signature(self._real.get_decoder_dummy_data).bind(*a, **kw)
        self.calls.append({"seq_len": sig.arguments.get("seq_len"),
                           "mm_counts": dict(sig.arguments.get("mm_counts") or {})})
        return self._real.get_decoder_dummy_data(*a, **kw)

    def __getattr__(self, name):
        return getattr(self._real, name)


class StubModel:
    """Class attributes of the release's model class; any method call stops the run there
    (the first one a profile run makes is the encoder's) and records its keyword shapes."""

    def __init__(self, cls):
        self._cls, self.encoder_kwargs = cls, None

    def __getattr__(self, name):
        value = inspect.getattr_static(self._cls, name, None)
        if value is not None and not callable(value) and not isinstance(value, (property, staticmethod, classmethod)):
            return value

        def stop(*a, **kw):
            self.encoder_kwargs = {"method": name, **kw}
            raise StopAtEncoder(name)
        return stop


class StubRunner:
    """What ``GPUModelRunner.profile_run`` reads; its other methods are the release's own."""

    def __init__(self, runner_cls, attrs: dict):
        self._runner_cls = runner_cls
        self.__dict__.update(attrs)

    def __getattr__(self, name):
        value = inspect.getattr_static(self._runner_cls, name, None)
        if isinstance(value, property):
            return value.fget(self)
        if isinstance(value, staticmethod):
            return value.__func__
        if callable(value):
            return value.__get__(self, type(self))
        raise AttributeError(f"stub runner has no {name!r} (GPUModelRunner moved it)")


def _triples(x) -> list:
    """(t, h, w) rows of a grid tensor, a list of them, or a batched (n, 1, 3) stack."""
    x = x.tolist() if hasattr(x, "tolist") else x
    if x and isinstance(x[0], (int, float)):
        return [x]
    return [row for part in x for row in _triples(part)]


def _grids(kwargs: dict) -> dict:
    return {key.split("_")[0]: _triples(kwargs[key]) for key in ("image_grid_thw", "video_grid_thw")
            if kwargs.get(key) is not None}


def profile_run(mc, sc, budget_obj, runner_budget=None):
    from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VLForConditionalGeneration
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    reg = RecordingRegistry(registry())
    model = StubModel(Qwen2_5_VLForConditionalGeneration)
    attrs = dict(model_config=mc, scheduler_config=sc, mm_registry=reg, model=model,
                 max_model_len=mc.max_model_len, max_num_tokens=sc.max_num_batched_tokens,
                 max_num_reqs=sc.max_num_seqs, device="cpu", pin_memory=False,
                 supports_mm_inputs=True, is_multimodal_model=True, mm_budget=budget_obj,
                 is_pooling_model=False, uses_mrope=True)
    if budget_obj is None:  # before MultiModalBudget: the runner's own budget fields (its __init__'s)
        attrs["max_num_encoder_input_tokens"], attrs["encoder_cache_size"] = runner_budget
    runner = StubRunner(GPUModelRunner, attrs)
    COUNTERS.raw, COUNTERS.recording = [], True
    try:
        GPUModelRunner.profile_run(runner)
    except StopAtEncoder:
        pass
    finally:
        COUNTERS.recording = False
    if model.encoder_kwargs is None:
        raise RuntimeError("profile_run finished without reaching the encoder")
    grids = _grids(model.encoder_kwargs)
    modality = next(iter(grids), None)
    return {"calls": reg.calls, "modality": modality, "items": len(grids.get(modality, [])),
            "grid": grids.get(modality, [])[:1], "raw": COUNTERS.raw,
            "encoder_method": model.encoder_kwargs["method"]}
