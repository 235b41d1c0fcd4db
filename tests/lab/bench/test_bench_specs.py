"""The benches' specs and the one guard: flags -> spec -> command -> the same spec, stored
results rebuild their specs, and every bad value or conflict is refused before anything runs
with one line naming the field (and the other field) and the limit; the CLI exits 2."""
import re
import shlex
from pathlib import Path

import pytest

from refimpl.errors import ConfigError, UnknownModelError, UnknownVariantError
from refimpl.lab.bench import guard, sweep, trial
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import ServeSpec, StartupSpec, WerSpec, command_of, spec_from_params
from refimpl.lab.cli import main, parse

ROOT = Path(__file__).resolve().parents[3]
STORED = [p for p in sorted(ROOT.glob("results/*/*.json")) if not p.name.startswith(("twoproc_spawn", "throughput_sweep"))]


def argv_of(cmd: str) -> list[str]:
    return shlex.split(cmd)[2:]  # after "refimpl bench"


@pytest.mark.parametrize("spec", [
    StartupSpec(), StartupSpec(variants=("0.9.0+#19756+#24925+uint8",), calls=3, warmup=False, limit_mm_per_prompt={"video": 0},
                               mm_processor_kwargs={"max_pixels": 1003520}, numpy_hugepage="on"),
    StartupSpec(model="whisper-tiny", process_mode="mp", reset_scope="all", repeats=1, device="cpu"),
    ServeSpec(), ServeSpec(variants=("hf-generate",), max_num_seqs=4),
    ServeSpec(design="workload", rate=2.0, num_requests=200), ServeSpec(design="workload", variants=("audios-per-step@4",)),
    ServeSpec(design="paired", variants=("0.10.2+#24866", "0.11.0"), budget_s=450),
    ServeSpec(design="paired", against="first", repeats=4, warmup=False), WerSpec(max_new_tokens=8),
    ServeSpec(design="paired", variants=("0.10.2", "0.11.0"), max_concurrency=4, output_len=32),
    ServeSpec(design="workload", max_concurrency=2, output_len=16, max_tokens=16),
], ids=lambda s: s.command())
def test_command_repeats_the_spec(spec):
    parsed, out, in_process = parse(argv_of(spec.command()))
    assert parsed.resolve() == spec.resolve() and out is None and not in_process
    argv = argv_of(spec.command(output_json="x y.json", in_process=True))
    assert parse(argv)[1:] == ("x y.json", spec.fresh)


def test_command_lines():
    assert ServeSpec(design="paired", variants=("0.10.2+#24866", "0.11.0"), budget_s=450).command() == \
        "refimpl bench serve --design paired --variants '0.10.2+#24866' 0.11.0 --budget-s 450"
    assert StartupSpec(calls=2, repeats=5, warmup=False).command(in_process=True) == \
        "refimpl bench startup --repeats 5 --calls 2 --no-warmup --in-process"
    assert WerSpec().command(in_process=True) == "refimpl bench wer"  # always in this process
    assert ServeSpec(design="workload").resolve().variants == ("0.11.0", "hf-generate")
    assert ServeSpec(design="paired", budget_s=10).resolve().repeats > 10**5  # fixed time: the budget decides


@pytest.mark.parametrize("path", STORED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_stored_results_rebuild_their_specs(path):
    """The compatibility reader: every committed Result's command parses back into its spec,
    and every field the Result stored is that spec's."""
    res = Result.load(path)
    spec = spec_from_params(res.bench, res.params)
    assert spec.bench == res.bench
    assert parse(argv_of(command_of(res.bench, res.params)))[0].resolve() == spec.resolve()
    params = spec.params()
    for k in ("model", "num_requests", "max_tokens", "max_num_seqs", "max_model_len", "repeats", "calls"):
        if k in res.params and k in params and res.bench != "paired":
            assert res.params[k] == params[k], (path, k)
    assert list(res.variants) == list(spec.labels) or res.params.get("max_audios_per_step", 1) > 1


BAD = [  # (spec, field named, text of the limit)
    (StartupSpec(variants=()), "variants", "0.8.5"),
    (StartupSpec(variants=("turbo",)), "variants", "0.9.0"),
    (StartupSpec(variants=("0.8.5", "0.8.5")), "variants", "distinct"),
    (StartupSpec(variants=("0.8.5", "", "0.9.0")), "variants", "non-empty"),
    (StartupSpec(repeats=0), "repeats", ">= 1"),
    (StartupSpec(calls=0), "calls", ">= 1"),
    (StartupSpec(max_model_len=0), "max_model_len", ">= 1"),
    (StartupSpec(model="llama"), "model", "qwen2.5-vl-3b"),
    (StartupSpec(device="tpu"), "device", "cuda"),
    (StartupSpec(process_mode="thread"), "process_mode", "mp"),
    (StartupSpec(numpy_hugepage="maybe"), "numpy_hugepage", "off"),
    (StartupSpec(limit_mm_per_prompt={"audio": 1}), "limit_mm_per_prompt", "image"),
    (StartupSpec(mm_processor_kwargs={"max_pixelz": 5}), "mm_processor_kwargs", "preprocessor_config"),
    (StartupSpec(model_path="/nonexistent"), "model_path", "config.json"),
    (ServeSpec(repeats=0), "repeats", ">= 1"),
    (ServeSpec(budget_s=0.0), "budget_s", "> 0"),
    (ServeSpec(num_requests=0), "num_requests", ">= 1"),
    (ServeSpec(max_tokens=0), "max_tokens", ">= 1"),
    (ServeSpec(max_tokens=445), "max_tokens", "<= 444"),
    (ServeSpec(design="workload", max_tokens=447), "max_tokens", "<= 446"),
    (ServeSpec(max_num_seqs=0), "max_num_seqs", ">= 1"),
    (ServeSpec(num_gpu_blocks=0), "num_gpu_blocks", ">= 1"),
    (ServeSpec(num_gpu_blocks=122), "num_gpu_blocks", "123"),
    (ServeSpec(warmup_requests=-1), "warmup_requests", ">= 0"),
    (ServeSpec(design="burst"), "design", "paired"),
    (ServeSpec(against="last"), "against", "previous"),
    (ServeSpec(model="qwen2.5-vl-3b"), "model", "Whisper"),
    (ServeSpec(variants=("0.10.2", "turbo")), "variants", "0.11.0"),
    (ServeSpec(variants=("0.10.2+#24866@2",)), "variants", "audios-per-step"),
    (ServeSpec(variants=("audios-per-step@0",)), "variants", "N >= 1"),
    (ServeSpec(design="paired", variants=("0.10.2",)), "variants", "two or more"),
    (ServeSpec(design="paired", variants=("0.10.2", "hf-generate")), "variants", "engine variants"),
    (ServeSpec(design="workload", variants=("0.10.2", "0.10.2+#24866")), "variants", "one engine"),
    (ServeSpec(design="workload", rate=0.0), "rate", "> 0"),
    (WerSpec(max_new_tokens=0), "max_new_tokens", ">= 1"),
    (WerSpec(max_new_tokens=447), "max_new_tokens", "<= 446"),
]


@pytest.mark.parametrize("spec,field,limit", BAD, ids=[f"{s.name}-{f}-{i}" for i, (s, f, _) in enumerate(BAD)])
def test_bad_value_names_field_and_limit(spec, field, limit):
    with pytest.raises(ConfigError) as e:
        guard.check(spec)
    assert e.value.field == field and limit in str(e.value.limit), str(e.value)
    if "turbo" in str(spec):
        assert isinstance(e.value, UnknownVariantError) and "refimpl bench" in e.value.message
    if field == "model":
        assert isinstance(e.value, UnknownModelError)


@pytest.mark.parametrize("spec,field,other", [
    (StartupSpec(reset_scope="all"), "reset_scope", "process_mode"),
    (StartupSpec(calls=2, process_mode="mp"), "calls", "process_mode"),
    (ServeSpec(rate=2.0), "rate", "design"),
    (ServeSpec(design="workload", against="first"), "against", "design"),
    (ServeSpec(design="paired", warmup_requests=3), "warmup_requests", "design"),
])
def test_conflicting_fields_are_refused_naming_both(spec, field, other):
    with pytest.raises(ConfigError) as e:
        guard.check(spec)
    assert e.value.field == field and other in str(e.value) and field in e.value.message


def test_encoder_batch_labels_are_one_rule_for_every_design():
    for design in ("fresh", "workload"):
        guard.check(ServeSpec(design=design, variants=("audios-per-step@4",), num_requests=1))
    guard.check(ServeSpec(design="paired", variants=("0.11.0", "audios-per-step@4"), num_requests=1))
    with pytest.raises(ConfigError, match="only with design fresh"):
        guard.check(ServeSpec(design="paired"), in_process=True)


@pytest.mark.parametrize("argv,field", [
    (["startup", "--variants", "nope"], "variants"),
    (["startup", "--limit-mm-per-prompt", "audio", "1"], "limit_mm_per_prompt"),
    (["startup", "--calls", "0"], "calls"),
    (["startup", "--reset-scope", "all"], "reset_scope"),
    (["startup", "--repeats", "0"], "repeats"),
    (["serve", "--num-requests", "0"], "num_requests"),
    (["serve", "--design", "paired", "--variants", "0.10.2", "turbo"], "variants"),
    (["serve", "--rate", "2"], "rate"),
    (["serve", "--design", "workload", "--in-process"], "in_process"),
    (["wer", "--max-new-tokens", "0"], "max_new_tokens"),
    (["startup", "--output-json", "/proc/x.json"], "output_json"),
    (["startup", "--output-json", "/tmp"], "output_json"),
    (["serve", "--output-json", "/"], "output_json"),
    (["wer", "--output-json", "/tmp"], "output_json"),
])
def test_cli_prints_the_error_and_exits_2(argv, field, capsys, monkeypatch):
    _refused(argv, field, capsys, monkeypatch)


def _refused(argv, field, capsys, monkeypatch) -> str:
    """``refimpl bench ARGV`` exits 2 with one line naming ``field`` and its limit; nothing runs."""
    monkeypatch.setattr(trial, "executor", lambda *a: pytest.fail("ran despite a bad value"))
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"refimpl bench {argv[0]}: error: {field}:") and "limit" in err and err.count("\n") == 1
    return err


def test_unknown_bench_and_flag_name_the_choices(capsys):
    """tyro's parse errors are one line naming the field, as every other refusal (exit status 2)."""
    for argv, line in ((["bench", "nope"], "refimpl bench: error: bench: got nope (limit: startup, serve, wer"),
                       (["bench", "startup", "--nope"], "refimpl bench startup: error: nope: unknown flag --nope"),
                       (["bench", "startup", "--repeatz", "2"], "refimpl bench startup: error: repeatz: unknown "
                        "flag --repeatz (limit: a flag of `refimpl bench NAME --help` (perhaps --repeats))"),
                       (["bench", "startup", "--max-model-len", "32k"],
                        "refimpl bench startup: error: max_model_len: cannot read '32k' as {None}|INT"),
                       (["bench", "serve", "--rate", "fast"], "refimpl bench serve: error: rate: cannot read 'fast'")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(line) and err.count("\n") == 1 and "limit" in err, (argv, err)
    assert main(["nope"]) == 2 and main(["--help"]) == 0
    with pytest.raises(SystemExit) as e:
        main(["bench", "startup", "--help"])
    assert e.value.code == 0 and "--max-model-len" in capsys.readouterr().out


def test_output_json_must_be_a_writable_file_path(tmp_path):
    guard.check_output(tmp_path / "new" / "deeper" / "x.json")  # created at the end, nothing now
    (tmp_path / "old.json").write_text("{}")
    guard.check_output(tmp_path / "old.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]
    for bad in (tmp_path, tmp_path / "old.json" / "x.json", "/dev/null", "/proc/x.json", "/proc/new/x.json"):
        with pytest.raises(ConfigError) as e:
            guard.check_output(bad)
        assert e.value.field == "output_json" and "writable file path" in e.value.limit


@pytest.mark.parametrize("argv", [["startup", "--device", "cuda"], ["serve", "--device", "cuda"]], ids=lambda a: a[0])
def test_cuda_without_a_gpu_is_refused_before_anything_runs(argv, capsys, monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "CUDA is not available here" in _refused(argv, "device", capsys, monkeypatch)
    spec = StartupSpec(device="cuda")  # a GPU Result's spec still rebuilds on a CPU machine
    assert command_of("startup", spec.params()) == spec.command()


def test_model_path_needs_both_configs(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="preprocessor_config.json") as e:
        guard.check(StartupSpec(model_path=str(tmp_path)))
    assert e.value.field == "model_path"
    (tmp_path / "preprocessor_config.json").write_text('{"max_pixels": 1003520, "processor_class": "x"}')
    with pytest.raises(ConfigError, match="no weights file"):  # a start-up run loads them (issue 29, kind 6)
        guard.check(StartupSpec(model_path=str(tmp_path)))
    (tmp_path / "model.safetensors").write_bytes(b"")
    from refimpl.lab.bench.startup import make_vllm_config
    mc = make_vllm_config(StartupSpec(model_path=str(tmp_path), mm_processor_kwargs={"min_pixels": 3136})).model_config
    assert (mc.load_format, mc.model_path) == ("hf", str(tmp_path))
    assert mc.mm_processor_kwargs == {"max_pixels": 1003520, "min_pixels": 3136}  # the directory's, then the flag's


def _documented_commands():
    """(file, argv) of the ``refimpl bench`` lines of docs/cli.md (the README's command section)."""
    for m in re.finditer(r"^refimpl bench (.*)$", (ROOT / "docs/cli.md").read_text(), re.M):
        yield "cli.md", shlex.split(m[1], comments=True)


def test_documented_commands_parse_and_pass_the_guard(monkeypatch, tmp_path):
    """Every bench command of docs/cli.md and every run of the GPU session's sweep files
    (benchmarks/gpu_session_*.toml, scripts/gpu_session.sh) parses and passes the guard (memory and
    CUDA aside: this machine is not the one they are for)."""
    monkeypatch.setattr(guard, "check_memory", lambda *a, **k: None)
    monkeypatch.setattr(guard, "resolve_device", lambda d: "cpu")
    seen = set()
    for where, argv in _documented_commands():
        spec, out, in_process = parse(argv)
        guard.check(spec.replace(model_path=None) if getattr(spec, "model_path", None) == "DIR" else spec, out, in_process)
        seen.add((where, spec.bench))
    for bench in ("serve", "startup"):
        for run in sweep.plan(ROOT / "benchmarks" / f"gpu_session_{bench}.toml", bench, tmp_path).runs:
            seen.add(("gpu_session", run.spec.bench))
    assert {(w, b) for w in ("cli.md", "gpu_session") for b in ("startup", "budget", "paired", "workload")} <= seen


# scripts/gpu_bench.sh's commands (at 1014365, its defaults: DEVICE cuda, 16 requests per paired block, 32
# tokens, 16 sequences, the caps' budgets 120 - 40 and 100 - 40 s) that the GPU session's sweep files replace
GPU_BENCH = {
    "paired_whisper-large-v3": "serve --design paired --model whisper-large-v3 --variants 0.10.2 '0.10.2+#24866' "
    "0.11.0 --budget-s 80 --num-requests 16 --max-tokens 32 --max-num-seqs 16 --device cuda",
    "paired_whisper-large-v3_encoder-batch": "serve --design paired --model whisper-large-v3 --against first "
    "--variants 0.11.0 audios-per-step@2 audios-per-step@4 audios-per-step@8 --budget-s 60 --num-requests 16 "
    "--max-tokens 32 --max-num-seqs 16 --device cuda",
    "workload_whisper-large-v3_both": "serve --design workload --model whisper-large-v3 --repeats 2 "
    "--num-requests 32 --max-tokens 32 --max-num-seqs 16 --device cuda --warmup-requests 2",
    "startup_qwen2.5-vl-3b_50k": "startup --model qwen2.5-vl-3b --variants 0.8.5 0.9.0 0.11.1 refimpl "
    "--device cuda --warmup --repeats 2 --max-model-len 50000",
    "budget_qwen2.5-vl-3b_50k": "startup --model qwen2.5-vl-3b --variants 0.8.5 0.9.0 --calls 2 --device cuda "
    "--repeats 2 --max-model-len 50000",
}


def test_the_gpu_session_files_run_what_gpu_bench_sh_ran(monkeypatch, tmp_path):
    """benchmarks/gpu_session_*.toml hold gpu_bench.sh's five default runs, spec for spec, in its order
    within each bench (Whisper first)."""
    monkeypatch.setattr(guard, "resolve_device", lambda d: "cuda")
    runs = [r for b in ("serve", "startup")
            for r in sweep.plan(ROOT / "benchmarks" / f"gpu_session_{b}.toml", b, tmp_path).runs]
    assert [r.name for r in runs] == list(GPU_BENCH)
    for r in runs:
        assert r.spec == parse(shlex.split(GPU_BENCH[r.name]))[0], r.name
