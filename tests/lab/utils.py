"""A synthetic calibration for the cost-model and explorer tests: round rates for every key the
model reads (qwen2.5-vl-3b and whisper-tiny calibrated), so that no test depends on a committed
results/<hw>/calibration.json."""
GiB = 1 << 30


def synthetic_rates() -> dict[str, float]:
    """Round rates for every key the model reads (qwen2.5-vl-3b and whisper-tiny calibrated)."""
    r = {"rss.base": GiB, "rss.imports": GiB, "hf.text_only_s": 0.01, "hf.image_s_per_mp": 0.02,
         "hf.image_peak_per_pixel": 40.0, "copy_s_per_gib": 0.5, "free_s_per_gib": 0.1}
    for dt, f in (("uint8", 0.3), ("int64", 0.4), ("float32", 0.5), ("pil", 0.6)):
        r[f"fill_s_per_gib.{dt}"] = f
    for path, s in (("v0.8.5", 0.5), ("v0.9.0", 3.0), ("v0.9.2", 2.0), ("stream", 0.25)):
        for kind in ("ndarray", "image"):
            r[f"hash_s_per_gib.{path}.{kind}"] = s
            r[f"hash_peak.{path}.{kind}"] = {"v0.8.5": 1, "v0.9.0": 3, "v0.9.2": 2, "stream": 0}[path]
    for dt, a, b, peak in (("uint8", 0.01, 0.03, 13.0), ("int64", 0.02, 0.03, 20.0)):
        r[f"hf.video_in_s_per_mp.{dt}"], r[f"hf.video_out_s_per_mp.{dt}"] = a, b
        r[f"hf.video_peak_per_element.{dt}"] = peak
    for m in ("qwen2.5-vl-3b", "whisper-tiny", "whisper-tiny.en", "whisper-large-v3"):
        r[f"first_use.import_s.{m}"], r[f"first_use.processor_build_s.{m}"] = 1.0, 2.0
    for m in ("qwen2.5-vl-3b", "whisper-tiny"):
        k = f"model.{m}."
        r.update({k + "runner_s": 0.0, k + "load_s": 0.25, k + "dummy_run_s": 1.0, k + "dummy_run_peak": 2e8,
                  k + "kv_s_per_gib": 0.4, k + "kv_rss_per_byte": 1.0, f"rss.model.{m}": 1.5e8})
    r.update({"model.qwen2.5-vl-3b.encoder_exponent": 1.0, "model.qwen2.5-vl-3b.encoder_s_at_tokens": 1.0,
              "model.qwen2.5-vl-3b.encoder_tokens": 4096, "model.qwen2.5-vl-3b.encoder_peak_per_token": 1e4,
              "model.whisper-tiny.encoder_s_per_item": 0.3, "model.whisper-tiny.encoder_peak_per_item": 1e7})
    for m in ("whisper-tiny", "whisper-tiny.en", "whisper-large-v3"):
        r[f"model.{m}.registry_call_s"], r[f"hf.audio_s_per_item.{m}"] = 0.009, 0.05
    return r
