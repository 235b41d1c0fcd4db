"""A run the machine cannot hold is refused before it starts, naming the need and what is
available (refimpl/lab/bench/memory.py estimates, refimpl/lab/bench/guard.py refuses); a lower
--max-model-len gives a smaller run."""
import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.startup_memory import peak_bytes
from refimpl.engine.startup_plan import StartupPlan
from refimpl.errors import ConfigError, InsufficientMemoryError
from refimpl.lab.bench import guard, memory, startup, trial
from refimpl.lab.bench.guard import check_serving_memory, check_startup_memory
from refimpl.lab.bench.memory import GiB, startup_bytes
from refimpl.lab.bench.specs import ServeSpec, StartupSpec
from refimpl.variants import STARTUP_VARIANTS as V


def available(monkeypatch, n: int) -> None:
    monkeypatch.setattr(guard.psutil, "virtual_memory", lambda: type("VM", (), {"available": n, "total": 24 * GiB})())


def test_int64_cache_reset_needs_most_and_shorter_context_less():
    mc = ModelConfig("qwen2.5-vl-3b", device="cpu")  # 128000 tokens: 12 frames of 3584x3584
    need = {n: startup_bytes(mc, V[n]) for n in V}
    assert need["0.9.0"] > need["0.9.0+#19484"] > need["0.9.0+#24925"] > need["0.9.0+#24925+uint8"] > need["0.9.0+#19756+#24925+uint8"]
    assert need["0.8.5"] < need["0.9.0"] and need["shape-only"] <= need["refimpl"]
    assert 15 * GiB < need["0.9.0"] < 19 * GiB  # 12 * 3584^2 * 3 int64 values, 4 copies
    small = ModelConfig("qwen2.5-vl-3b", device="cpu", max_model_len=40000)
    assert startup_bytes(small, V["0.9.0"]) < need["0.9.0"] / 2


def test_refused_with_need_available_and_a_max_model_len_that_fits():
    mc = ModelConfig("qwen2.5-vl-3b", device="cpu")
    assert check_startup_memory(mc, [V["0.9.0+#24925+uint8"]], available=64 * GiB) < 8 * GiB
    with pytest.raises(InsufficientMemoryError, match=r"0\.9\.0 at.*GiB.*--max-model-len \d+ would fit") as e:
        check_startup_memory(mc, [V["0.8.5"], V["0.9.0"]], available=8 * GiB)
    assert e.value.field == "max_model_len" and e.value.limit == 8 * GiB
    fits = int(str(e.value).split("--max-model-len ")[1].split()[0])
    assert check_startup_memory(ModelConfig("qwen2.5-vl-3b", device="cpu", max_model_len=fits),
                                [V["0.9.0"]], available=8 * GiB) <= 8 * GiB


def test_memory_checked_before_each_run_and_refusal_names_need_and_free(monkeypatch):
    checked, ran = [], []
    monkeypatch.setattr(guard, "check_memory", lambda spec, available=None: checked.append(spec.labels))
    monkeypatch.setattr(startup, "run_once", lambda spec, v: ran.append(v) or {"total_s": 1.0, "peak_rss_bytes": 1})
    trial.run(StartupSpec(variants=("0.9.0+#19756+#24925+uint8", "shape-only"), repeats=2), in_process=True)
    assert checked == [("0.9.0+#19756+#24925+uint8", "shape-only")] + [(v,) for v in ran] and len(ran) == 6
    monkeypatch.undo()
    available(monkeypatch, 2 * GiB)
    with pytest.raises(InsufficientMemoryError, match=r"0\.8\.5 at.*needs about .* GiB.*2\.0 GiB available"):
        guard.check(StartupSpec(variants=("0.8.5",)))


def test_numpy_hugepage_off_by_default_in_workers():
    assert StartupSpec().worker_env() == {"NUMPY_MADVISE_HUGEPAGE": "0"}
    assert StartupSpec(calls=2, numpy_hugepage="on").worker_env() == {"NUMPY_MADVISE_HUGEPAGE": "1"}
    before = startup.set_numpy_hugepage(False)
    try:
        assert startup.thp_state()["numpy_madvise_hugepage"] is False
    finally:
        startup.set_numpy_hugepage(before)


def test_run_waits_for_memory_others_hold_then_refuses(monkeypatch):
    calls = []

    def short(times):
        def check(spec, available=None):
            calls.append(spec.labels)
            if len(calls) <= times:
                raise InsufficientMemoryError("max_model_len", GiB, "needs 2 GiB, 1 GiB available")
        return check
    monkeypatch.setattr(guard, "check_memory", short(2))
    guard.wait_for_memory(StartupSpec(), "0.9.0+#19756+#24925+uint8", wait_s=5, poll_s=0.01)  # memory came back on the third look
    assert calls == [("0.9.0+#19756+#24925+uint8",)] * 3
    calls.clear()
    monkeypatch.setattr(guard, "check_memory", short(10**6))
    with pytest.raises(InsufficientMemoryError, match="1 GiB available"):
        guard.wait_for_memory(StartupSpec(), "0.9.0+#19756+#24925+uint8", wait_s=0.05, poll_s=0.01)
    assert 1 < len(calls) < 10


def test_whisper_serving_memory_refused_from_the_configs_alone(monkeypatch):
    def cfg(seqs, blocks=None, read="dense-once"):
        return VllmConfig(ModelConfig("whisper-large-v3", scale="full", device="cpu"),
                          SchedulerConfig(max_num_seqs=seqs), CacheConfig(num_gpu_blocks=blocks, cross_attention_read=read))

    def copies(seqs, blocks):  # what the dense-once read adds over paged-runs (bytes)
        return (check_serving_memory(cfg(seqs, blocks), available=1 << 50)
                - check_serving_memory(cfg(seqs, blocks, "paged-runs"), available=1 << 50))
    one = 2 * 32 * 1500 * 1280 * 4  # (K, V) x layers x positions x d_model x float32
    assert copies(16, 4000) == 16 * one  # max_num_seqs bounds the running requests
    assert copies(64, 400) == 4 * one    # 400 blocks hold 4 requests (95 blocks each at least)
    with pytest.raises(InsufficientMemoryError, match=r"weights 5\.\d.*16 running requests.*16\.0 GiB available") as e:
        check_serving_memory(cfg(16, blocks=4000), available=16 * GiB)
    assert e.value.field == "num_gpu_blocks" and e.value.limit == 16 * GiB
    with pytest.raises(InsufficientMemoryError) as e:
        check_serving_memory(cfg(1, read="paged-runs"), available=4 * GiB)
    assert e.value.field == "scale"
    huge_dummy = VllmConfig(ModelConfig("whisper-tiny", device="cpu"), SchedulerConfig(max_num_batched_tokens=10**9))
    with pytest.raises(InsufficientMemoryError) as e:  # profile_run's dummy prompt: 10**9 token ids
        check_serving_memory(huge_dummy, available=8 * GiB)
    assert e.value.field == "max_num_batched_tokens"
    available(monkeypatch, 8 * GiB)
    with pytest.raises(InsufficientMemoryError, match="max_num_seqs=256"):
        check_serving_memory(VllmConfig(ModelConfig("whisper-large-v3", scale="full", device="cpu"),
                                        SchedulerConfig(max_num_seqs=256), CacheConfig(num_gpu_blocks=4000)))
    assert check_serving_memory(VllmConfig(ModelConfig("whisper-tiny", device="cpu"))) < 8 * GiB


def test_cuda_kv_sizing_leaves_room_for_the_dense_cross_copies(monkeypatch):
    import types

    import torch

    from refimpl.attention.cross_attention import dense_copy_bytes
    from refimpl.worker.gpu_model_runner import GPUModelRunner
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (100 * GiB, 140 * GiB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 40 * GiB)
    avail = {}
    for read in ("dense-once", "paged-runs"):
        vc = VllmConfig(ModelConfig("whisper-large-v3", scale="full", device="cpu", dtype="float16"),
                        SchedulerConfig(max_num_seqs=64), CacheConfig(cross_attention_read=read))
        runner = types.SimpleNamespace(device=torch.device("cuda"), cache_config=vc.cache_config,
                                       peak_memory_bytes=10 * GiB, vllm_config=vc)
        avail[read] = GPUModelRunner.determine_available_memory(runner)  # type: ignore[arg-type]
    assert avail["paged-runs"] == int(140 * GiB * 0.9) - 10 * GiB
    copies = 64 * 2 * 32 * 1500 * 1280 * 2  # seqs x (K, V) x layers x positions x d_model x fp16
    assert avail["paged-runs"] - avail["dense-once"] == copies
    assert dense_copy_bytes(vc) == 0 and copies == dense_copy_bytes(
        VllmConfig(vc.model_config, SchedulerConfig(max_num_seqs=64), CacheConfig()))


def test_serving_refused_before_any_run_and_the_cli_exits_2(monkeypatch, capsys, tmp_path):
    from refimpl.lab import cli
    monkeypatch.setattr(trial, "executor", lambda *a: pytest.fail("ran despite too little memory"))
    available(monkeypatch, GiB)
    argv = ["bench", "serve", "--model", "whisper-large-v3", "--device", "cpu", "--max-num-seqs", "64",
            "--num-gpu-blocks", "4000", "--in-process", "--output-json", str(tmp_path / "t.json")]
    assert cli.main(argv) == 2 and not (tmp_path / "t.json").exists()
    assert "error: num_gpu_blocks: whisper-large-v3 (small scale, float32)" in capsys.readouterr().err
    available(monkeypatch, 8 * GiB)
    guard.check_memory(ServeSpec(max_num_seqs=64).resolve())  # whisper-tiny fits


def test_whisper_startup_refused_in_the_parent_before_any_worker(monkeypatch):
    monkeypatch.setattr(memory, "serving_parts", lambda vc: ({"scale": 0, "kv_cache_memory_bytes": 0, "max_num_seqs": 0,
                                                               "max_num_batched_tokens": 1 << 50}, 1))
    with pytest.raises(InsufficientMemoryError) as e:
        guard.check_memory(StartupSpec(model="whisper-tiny"))
    assert e.value.field == "max_num_batched_tokens"
    guard.check_memory(StartupSpec(model="whisper-tiny", calls=2))  # budget calls build no engine


def test_full_scale_weights_on_cpu_count_in_the_startup_estimate():
    full, small = (ModelConfig("qwen2.5-vl-3b", device="cpu", scale=s) for s in ("full", "small"))
    extra = {mc.scale: StartupPlan.build(VllmConfig(mc), "shape-only").extra_weight_bytes for mc in (full, small)}
    assert extra["small"] == 0 and 13 * GiB < extra["full"] < 15 * GiB
    assert startup_bytes(full, V["shape-only"]) == startup_bytes(small, V["shape-only"]) + extra["full"]


def test_the_guard_refuses_at_the_plans_peak_naming_the_setting_and_the_figure():
    """One memory model: the refusal's need is the StartupPlan's peak with this machine's rates
    (the explorer's figure), its holders named."""
    mc = ModelConfig("qwen2.5-vl-3b", device="cpu")
    rates, _ = memory.startup_rates(mc.model)
    plan_peak = peak_bytes(StartupPlan.build(VllmConfig(mc), V["0.9.0"]), rates)
    assert check_startup_memory(mc, [V["0.9.0"]], available=plan_peak) == plan_peak
    with pytest.raises(InsufficientMemoryError, match=rf"needs about {plan_peak / GiB:.1f} GiB \(predicted peak RSS at "):
        check_startup_memory(mc, [V["0.9.0"]], available=plan_peak - 1)


def test_too_few_kv_blocks_refused_before_any_run():
    """The start-up KV check, from the configs alone: no worker starts for --num-gpu-blocks 122."""
    from refimpl.core.kv_cache_utils import blocks_for_one_request
    assert blocks_for_one_request(VllmConfig(ModelConfig("whisper-tiny", device="cpu"))) == 28 + 1 + 94
    with pytest.raises(ConfigError) as e:
        guard.check(ServeSpec(num_gpu_blocks=122))
    assert (e.value.field, e.value.limit) == ("num_gpu_blocks", 123)
    guard.check(ServeSpec(num_gpu_blocks=123))


def test_encoder_activations_per_token_follow_the_pair_size():
    from refimpl.engine.startup_memory import MemoryRates
    r = MemoryRates(encoder_per_token=45000.0, encoder_tokens=4096, encoder_per_token_large=30000.0,
                    encoder_large_tokens=16384)
    assert [r.encoder_bytes_per_token(t) for t in (1024, 4096, 8192, 16384, 65536)] == [
        45000.0, 45000.0, 37500.0, 30000.0, 30000.0]
    assert MemoryRates(encoder_per_token=45000.0).encoder_bytes_per_token(16384) == 45000.0  # not measured
