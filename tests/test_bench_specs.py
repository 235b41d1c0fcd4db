"""The typed specs of every bench (refimpl/bench/cli_spec.py; the fresh-process ones through
refimpl/bench/bench_spec.BenchSpec): flags -> spec -> command -> the same spec, stored results rebuild their specs, and every bad value is refused
before anything runs with a ConfigError naming the field and the limit (the CLI: exit 2)."""
import re
from pathlib import Path

import pytest

from refimpl.bench.budget import BudgetSpec
from refimpl.bench.cli_spec import command_of, spec_class
from refimpl.bench.paired import PairedSpec
from refimpl.bench.schema import Result
from refimpl.bench.startup import StartupSpec
from refimpl.bench.throughput import ThroughputSpec
from refimpl.bench.wer import WerSpec
from refimpl.bench.workload import WorkloadSpec
from refimpl.cli import main
from refimpl.errors import ConfigError, UnknownVariantError

ROOT = Path(__file__).resolve().parents[1]


def test_command_repeats_the_spec():
    s = PairedSpec(variants=["0.10.2+#24866", "0.11.0"], budget_s=450)
    assert s.variants == ("0.10.2+#24866", "0.11.0")
    assert s.command() == ("refimpl bench paired --variant 0.10.2+#24866,0.11.0 --budget-s 450 "
                           "--output-json paired_whisper-tiny.en.json")
    t = s.replace(gc_mode="default", ignore_eos=True, max_benchmark_s=12.5)
    assert t.command().endswith("--ignore-eos --gc default --max-benchmark-s 12.5 "
                                "--output-json paired_whisper-tiny.en.json")
    for spec in (s, t):
        assert PairedSpec.from_argv(spec.command().split()[3:]) == (spec, "paired_whisper-tiny.en.json")
    w = WorkloadSpec(engine="hf", num_requests=300)
    assert w.command() == ("refimpl bench workload --engine hf --num-requests 300 "
                           "--output-json workload_whisper-tiny.en.json")
    assert WorkloadSpec.from_argv(["--engine", "hf", "--num-requests", "300", "--output-json", "x.json"]) \
        == (w, "x.json")
    assert WerSpec().command() == "refimpl bench wer --output-json wer_whisper-tiny.en.json"
    assert WerSpec().command(output_json="out/w.json", in_process=True) == \
        "refimpl bench wer --output-json out/w.json"  # wer has no --in-process: it always is
    assert WerSpec.from_argv(["--max-new-tokens", "8"])[0] == WerSpec(max_new_tokens=8)
    with pytest.raises(TypeError, match="budget"):
        PairedSpec(budget=3)


def test_params_keep_the_result_keys_and_invert():
    p = PairedSpec(variants=("0.10.2", "audios-per-step@2")).params()
    assert p["variants"] == ("0.10.2", "audios-per-step@2") and p["gc_mode"] == "collect-disable"
    w = WorkloadSpec(variant="audios-per-step", max_audios_per_step=4)
    assert w.params()["variants"] == ["audios-per-step"] and "variant" not in w.params()
    assert WorkloadSpec.from_params(w.params()) == w
    hf = WorkloadSpec(engine="hf")
    assert hf.params()["variants"] == ["hf-generate"] and WorkloadSpec.from_params(hf.params()) == hf
    assert WerSpec(max_new_tokens=8).params() == {"model": "whisper-tiny.en", "variants": ["whisper-tiny.en"],
                                                  "max_new_tokens": 8}


@pytest.mark.parametrize("bench,cls", [("paired", PairedSpec), ("workload", WorkloadSpec), ("wer", WerSpec)])
def test_stored_results_rebuild_their_specs(bench, cls):
    paths = sorted(ROOT.glob(f"results/*/{bench}_*.json"))
    assert paths
    for path in paths:
        res = Result.load(path)
        spec = cls.from_params(res.params)
        assert cls.from_argv(spec.command().split()[3:])[0] == spec
        for k, v in spec.params().items():  # every stored field is the spec's
            if k in res.params:
                assert res.params[k] == (list(v) if isinstance(v, tuple) else v), (path, k)


def test_fresh_process_flags_keep_their_shape():
    argv = ["--model", "qwen2.5-vl-3b", "--variant", "0.8.5, 0.9.2", "--no-warmup",
            "--limit-mm-per-prompt", "video=0", "--limit-mm-per-prompt", "image=2,audio=1",
            "--process-mode", "mp", "--reset-scope", "all", "--numpy-hugepage", "on",
            "--timeout-s", "60", "--output-json", "x.json", "--in-process"]
    s, opts = StartupSpec.parse(argv)
    assert s == StartupSpec(variants=("0.8.5", "0.9.2"), warmup=False, process_mode="mp",
                            limit_mm_per_prompt={"video": 0, "image": 2, "audio": 1},
                            reset_scope="all", numpy_hugepage="on", timeout_s=60.0)
    assert vars(opts) == {"output_json": "x.json", "in_process": True}
    assert s.command() == ("refimpl bench startup --model qwen2.5-vl-3b --variant 0.8.5,0.9.2 "
                           "--no-warmup --timeout-s 60 --limit-mm-per-prompt video=0,image=2,audio=1 "
                           "--process-mode mp --reset-scope all --numpy-hugepage on "
                           "--output-json startup_qwen2.5-vl-3b.json")
    assert StartupSpec.from_argv(["--model", "whisper-tiny", "--output-json", "x"]) == \
        (StartupSpec(model="whisper-tiny"), "x")
    for bad in (argv[2:], argv[:-3],  # --model and --output-json are required
                ["--model", "qwen2.5-vl-3b", "--scale", "huge", "--output-json", "x"]):
        with pytest.raises(SystemExit):
            StartupSpec.parse(bad)
    with pytest.raises(SystemExit):  # the budget's calls run in one process: no --process-mode
        BudgetSpec.parse(["--model", "qwen2.5-vl-3b", "--process-mode", "mp", "--output-json", "x"])
    with pytest.raises(ConfigError, match="MODALITY=N"):
        StartupSpec.parse(["--model", "qwen2.5-vl-3b", "--limit-mm-per-prompt", "video", "--output-json", "x"])
    t = ThroughputSpec.from_argv(["--engine", "hf", "--output-json", "x"])[0]
    assert t.variants == ("hf-generate",) and t.command() == \
        "refimpl bench throughput --variant hf-generate --engine hf --output-json throughput_whisper-tiny.json"
    with pytest.raises(ConfigError, match="hf-generate"):  # never silently replaced
        ThroughputSpec.from_argv(["--engine", "hf", "--variant", "0.10.2", "--output-json", "x"])


@pytest.mark.parametrize("spec", [
    StartupSpec(), StartupSpec(variants=("0.8.5", "0.9.0"), repeats=1, device="cpu",
                               max_model_len=20000, limit_mm_per_prompt={"video": 0}, memory_wait_s=0.5),
    BudgetSpec(calls=3, warmup=False, numpy_hugepage="on", max_num_batched_tokens=4096),
    ThroughputSpec(), ThroughputSpec(engine="hf", variants=("hf-generate",), max_num_seqs=4),
    ThroughputSpec(variants=("0.10.2", "audios-per-step"), max_audios_per_step=4, num_gpu_blocks=500,
                   scale="small", seed=3, warmup_requests=0),
], ids=lambda s: s.command())
def test_fresh_process_command_repeats_the_spec(spec):
    """The printed line runs as printed: --output-json (required) is in it."""
    assert type(spec).from_argv(spec.command().split()[3:]) == (spec, f"{spec.bench}_{spec.model}.json")
    argv = spec.command(in_process=True).split()[3:]
    assert argv[-1] == "--in-process" and type(spec).parse(argv)[1].in_process


def test_in_process_results_print_in_process_commands():
    """summary.md's "Command:" line of a QUICK (in-process) Result says --in-process."""
    from refimpl.analysis import startup as S
    res = Result.load(ROOT / "results/cpu-amd-epyc-2c/startup_qwen2.5-vl-3b.json")
    assert "--in-process" not in S.summary_md(res)
    res.env["in_process"] = True
    line = next(x for x in S.summary_md(res).splitlines() if x.startswith("Command:"))
    assert "--output-json startup_qwen2.5-vl-3b.json --in-process`" in line
    assert command_of("paired", PairedSpec().params(), in_process=True).endswith(".json")


@pytest.mark.parametrize("bench,cls", [("startup", StartupSpec), ("budget", BudgetSpec),
                                       ("throughput", ThroughputSpec)])
def test_stored_fresh_process_results_rebuild_their_specs(bench, cls):
    paths = [p for p in sorted(ROOT.glob(f"results/*/{bench}_*.json"))
             if "sweep" not in p.name]  # a sweep's params list several max_tokens: no one spec
    assert paths
    for path in paths:
        res = Result.load(path)
        spec = cls.from_params(res.params)
        assert cls.from_argv([*spec.command().split()[3:], "--output-json", "x"])[0] == spec
        assert command_of(bench, res.params) == spec.command()  # the reports' "Command:" lines
        for k, v in spec.params().items():
            if k in res.params:
                assert res.params[k] == (list(v) if isinstance(v, tuple) else v), (path, k)


BAD = [  # (spec class, fields, field named, limit text)
    (PairedSpec, {"rounds": 0}, "rounds", ">= 1"),
    (PairedSpec, {"rounds": -1}, "rounds", ">= 1"),
    (PairedSpec, {"budget_s": 0.0}, "budget_s", "> 0"),
    (PairedSpec, {"max_benchmark_s": -5.0}, "max_benchmark_s", "> 0"),
    (PairedSpec, {"block_requests": 0}, "block_requests", ">= 1"),
    (PairedSpec, {"max_tokens": 0}, "max_tokens", ">= 1"),
    (PairedSpec, {"max_tokens": 447}, "max_tokens", "<= 446"),
    (PairedSpec, {"max_num_seqs": 0}, "max_num_seqs", ">= 1"),
    (PairedSpec, {"max_audios_per_step": 0}, "max_audios_per_step", ">= 1"),
    (PairedSpec, {"num_gpu_blocks": 0}, "num_gpu_blocks", ">= 1"),
    (PairedSpec, {"warmup_rounds": -1}, "warmup_rounds", ">= 0"),
    (PairedSpec, {"seed": -1}, "seed", ">= 0"),
    (PairedSpec, {"against": "last"}, "against", "previous"),
    (PairedSpec, {"gc_mode": "off"}, "gc_mode", "collect-disable"),
    (PairedSpec, {"device": "tpu"}, "device", "cuda"),
    (PairedSpec, {"model": "llama"}, "model", "whisper-tiny.en"),
    (PairedSpec, {"variants": ("0.10.2",)}, "variants", "two or more"),
    (PairedSpec, {"variants": ("0.10.2", "0.10.2")}, "variants", "distinct"),
    (PairedSpec, {"variants": ("0.10.2", "turbo")}, "variants", "0.11.0"),
    (PairedSpec, {"variants": ("0.10.2", "0.10.2+#24866@2")}, "variants", "audios-per-step@N"),
    (PairedSpec, {"variants": ("0.10.2", "audios-per-step@0")}, "variants", "N >= 1"),
    (WorkloadSpec, {"num_requests": 0}, "num_requests", ">= 1"),
    (WorkloadSpec, {"arrival": "poisson", "rate": 0.0}, "rate", "> 0"),
    (WorkloadSpec, {"arrival": "burst"}, "arrival", "poisson"),
    (WorkloadSpec, {"engine": "vllm"}, "engine", "hf"),
    (WorkloadSpec, {"variant": "turbo"}, "variant", "0.11.0"),
    (WorkloadSpec, {"max_tokens": 0}, "max_tokens", ">= 1"),
    (WorkloadSpec, {"max_tokens": 500}, "max_tokens", "<= 446"),
    (WorkloadSpec, {"model": "whisper-tiny", "max_tokens": 445}, "max_tokens", "<= 444"),
    (WorkloadSpec, {"max_num_seqs": 0}, "max_num_seqs", ">= 1"),
    (WorkloadSpec, {"max_audios_per_step": 0}, "max_audios_per_step", ">= 1"),
    (WorkloadSpec, {"num_gpu_blocks": 0}, "num_gpu_blocks", ">= 1"),
    (WorkloadSpec, {"warmup_requests": -1}, "warmup_requests", ">= 0"),
    (WerSpec, {"max_new_tokens": 0}, "max_new_tokens", ">= 1"),
    (StartupSpec, {"variants": ()}, "variants", "0.9.0"),
    (StartupSpec, {"variants": ("turbo",)}, "variant", "0.9.0"),
    (StartupSpec, {"repeats": -1}, "repeats", ">= 1"),
    (StartupSpec, {"repeats": 0}, "repeats", ">= 1"),
    (StartupSpec, {"variants": ("0.8.5", "0.8.5")}, "variants", "distinct"),
    (StartupSpec, {"variants": ("0.8.5", "", "0.9.0")}, "variants", "non-empty"),
    (BudgetSpec, {"variants": ("0.9.0", "0.8.5", "0.9.0")}, "variants", "distinct"),
    (ThroughputSpec, {"variants": ("0.10.2", "")}, "variants", "non-empty"),
    (PairedSpec, {"variants": ("0.10.2", "", "0.10.2+#24866")}, "variants", "non-empty"),
    (StartupSpec, {"timeout_s": 0.0}, "timeout_s", "> 0"),
    (StartupSpec, {"memory_wait_s": -1.0}, "memory_wait_s", ">= 0"),
    (StartupSpec, {"device": "tpu"}, "device", "cuda"),
    (StartupSpec, {"model": "llama"}, "model", "qwen2.5-vl-3b"),
    (StartupSpec, {"max_model_len": 0}, "max_model_len", ">= 1"),
    (StartupSpec, {"max_num_batched_tokens": 0}, "max_num_batched_tokens", ">= 1"),
    (StartupSpec, {"process_mode": "thread"}, "process_mode", "mp"),
    (StartupSpec, {"reset_scope": "some"}, "reset_scope", "v0.9.0"),
    (BudgetSpec, {"calls": 0}, "calls", ">= 1"),
    (PairedSpec, {"rounds": 2, "budget_s": 10.0}, "rounds", "--budget-s"),
    (WorkloadSpec, {"rate": 0.0}, "rate", "poisson"),
    (WorkloadSpec, {"engine": "hf", "variant": "0.10.2"}, "variant", "engine 'hf'"),
    (ThroughputSpec, {"engine": "vllm"}, "engine", "hf"),
    (ThroughputSpec, {"engine": "hf"}, "variants", "hf-generate"),
    (ThroughputSpec, {"num_requests": 0}, "num_requests", ">= 1"),
    (ThroughputSpec, {"max_tokens": 0}, "max_tokens", ">= 1"),
    (ThroughputSpec, {"max_tokens": 445}, "max_tokens", "<= 444"),
    (ThroughputSpec, {"max_audios_per_step": 0}, "max_audios_per_step", ">= 1"),
    (ThroughputSpec, {"model": "whisper-tiny.en"}, "model", "whisper-large-v3"),
    (WerSpec, {"max_new_tokens": 447}, "max_new_tokens", "<= 446"),
]


@pytest.mark.parametrize("cls,fields,field,limit", BAD, ids=[f"{c.__name__}-{'-'.join(map(str, f.values()))}"
                                                            for c, f, _, _ in BAD])
def test_bad_value_names_field_and_limit(cls, fields, field, limit):
    with pytest.raises(ConfigError) as e:
        cls(**fields)
    assert e.value.field == field and limit in str(e.value.limit), str(e.value)
    if "turbo" in str(fields):
        assert isinstance(e.value, UnknownVariantError)


def test_rate_is_refused_without_poisson_arrivals():
    assert WorkloadSpec(arrival="poisson", rate=2.0).rate == 2.0
    with pytest.raises(ConfigError, match="poisson") as e:
        WorkloadSpec(arrival="all", rate=2.0)
    assert e.value.field == "rate"


@pytest.mark.parametrize("argv,field", [
    (["workload", "--num-requests", "0"], "num_requests"),
    (["paired", "--rounds", "-1"], "rounds"),
    (["paired", "--variant", "0.10.2,turbo"], "variants"),
    (["wer", "--max-new-tokens", "0"], "max_new_tokens"),
    (["startup", "--model", "qwen2.5-vl-3b", "--variant", "nope", "--output-json", "x"], "variant"),
    (["startup", "--model", "qwen2.5-vl-3b", "--limit-mm-per-prompt", "video", "--output-json", "x"],
     "limit_mm_per_prompt"),
    (["budget", "--model", "qwen2.5-vl-3b", "--calls", "0", "--output-json", "x"], "calls"),
    (["throughput", "--num-requests", "0", "--output-json", "x"], "num_requests"),
    (["throughput", "--engine", "hf", "--variant", "0.10.2", "--output-json", "x"], "variants"),
    (["workload", "--rate", "2"], "rate"),
    (["workload", "--engine", "hf", "--variant", "0.10.2"], "variant"),
    (["paired", "--rounds", "2", "--budget-s", "10"], "rounds"),
    (["startup", "--model", "whisper-tiny", "--variant", "0.8.5,0.8.5", "--output-json", "x"], "variants"),
    (["startup", "--model", "whisper-tiny", "--variant", "0.8.5,,0.9.0", "--output-json", "x"],
     "variants"),
    (["paired", "--variant", "0.10.2,0.10.2+#24866,"], "variants"),
    (["startup", "--model", "whisper-tiny", "--repeats", "0", "--output-json", "x"], "repeats"),
    # an --output-json that could not be written at the end: refused before the run
    (["startup", "--model", "whisper-tiny", "--output-json", "/proc/x.json"], "output_json"),
    (["startup", "--model", "whisper-tiny", "--output-json", "/tmp"], "output_json"),
    (["budget", "--model", "whisper-tiny", "--output-json", "/proc/x.json"], "output_json"),
    (["throughput", "--output-json", "/"], "output_json"),
    (["workload", "--output-json", "/proc/x.json"], "output_json"),
    (["workload", "--output-json", "/tmp"], "output_json"),
    (["paired", "--output-json", "/proc/x.json"], "output_json"),
    (["wer", "--output-json", "/tmp"], "output_json"),
])
def test_cli_prints_the_error_and_exits_2(argv, field, capsys, monkeypatch):
    _refused(argv, field, capsys, monkeypatch)


def _refused(argv, field, capsys, monkeypatch) -> str:
    """``refimpl bench ARGV`` exits 2 with one line naming ``field`` and its limit, and no
    bench runs; returns that stderr."""
    import refimpl.bench.orchestrate
    import refimpl.bench.paired
    import refimpl.bench.wer
    import refimpl.bench.workload
    for mod in (refimpl.bench.paired, refimpl.bench.wer, refimpl.bench.workload):
        monkeypatch.setattr(mod, "run", lambda *a, **k: pytest.fail("ran despite a bad value"))
    for name in ("run_fresh", "run_in_process"):
        monkeypatch.setattr(refimpl.bench.orchestrate, name, lambda *a, **k: pytest.fail("ran despite a bad value"))
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"refimpl bench {argv[0]}: error: {field}:") and "limit" in err
    return err


def test_output_json_must_be_a_writable_file_path(tmp_path):
    """check_output_json: a missing parent folder is fine where it can be created (write_json
    creates it; nothing is created by the check); a folder, a file as the folder, a device,
    a folder that takes no file are refused naming output_json."""
    from refimpl.bench.common import check_output_json
    check_output_json(tmp_path / "new" / "deeper" / "x.json")
    (tmp_path / "old.json").write_text("{}")
    check_output_json(tmp_path / "old.json")  # replaced at the end
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]
    for bad in (tmp_path, tmp_path / "old.json" / "x.json", "/dev/null", "/proc/x.json", "/proc/new/x.json"):
        with pytest.raises(ConfigError) as e:
            check_output_json(bad)
        assert e.value.field == "output_json" and "writable file path" in e.value.limit


CUDA_ARGV = [["startup", "--model", "whisper-tiny", "--device", "cuda", "--output-json", "x"],
             ["budget", "--model", "whisper-tiny", "--device", "cuda", "--output-json", "x"],
             ["throughput", "--device", "cuda", "--output-json", "x"],
             ["workload", "--device", "cuda"], ["paired", "--device", "cuda"]]


@pytest.mark.parametrize("argv", CUDA_ARGV, ids=lambda a: a[0])
def test_cuda_without_a_gpu_is_refused_before_anything_runs(argv, capsys, monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "CUDA is not available here" in _refused(argv, "device", capsys, monkeypatch)
    spec = StartupSpec(device="cuda")  # a GPU Result's spec still rebuilds on a CPU machine
    assert command_of("startup", spec.params()) == spec.command()


def test_report_refuses_cuda_without_a_gpu(tmp_path, capsys, monkeypatch):
    import torch

    import refimpl.report
    from refimpl.config import resolve_device
    from refimpl.report import main as report_main
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(refimpl.report, "execute", lambda *a, **k: pytest.fail("ran despite no CUDA"))
    assert resolve_device("auto") == "cpu"
    assert report_main(["--device", "cuda", "--out-dir", str(tmp_path / "never-made")]) == 2
    assert capsys.readouterr().err.startswith("refimpl report: error: device: CUDA is not available here")
    assert not (tmp_path / "never-made").exists()


@pytest.mark.parametrize("bench", ["startup", "budget", "throughput"])
def test_fresh_process_help(bench, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", bench, "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and f"refimpl bench {bench}" in out
    assert all(f in out for f in ("--variant", "--no-warmup", "--output-json", "--in-process"))


def _documented_commands():
    """(file, bench, args) of the ``refimpl bench`` lines of README.md and the ``run NAME T
    bench ...`` lines of scripts/gpu_bench.sh (continuations joined, shell variables given
    sample values, PATH -> x.json)."""
    shell = {"VL": "qwen2.5-vl-3b", "ASR": "whisper-large-v3", "DEVICE": "cpu"}
    script = re.sub(r"\$\(\([^)]*\)\)", "80", (ROOT / "scripts/gpu_bench.sh").read_text().replace("\\\n", " "))
    script = re.sub(r'"?\$\{?(\w+)[^}"\s]*\}?"?', lambda m: shell.get(m[1], "2"), script)
    for where, text, pattern in [("README.md", (ROOT / "README.md").read_text(), r"^refimpl bench (\w+)(.*)$"),
                                 ("gpu_bench.sh", script, r"^run \S+ \S+ bench (\w+)(.*)$")]:
        for m in re.finditer(pattern, text, re.M):
            yield where, m[1], re.split(r"\s#", m[2])[0].replace(" PATH", " x.json").split()


def test_documented_commands_parse():
    """Every bench command of README.md and scripts/gpu_bench.sh parses into its spec."""
    seen = set()
    for where, bench, args in _documented_commands():
        spec_class(bench).parse(args if "--output-json" in args else [*args, "--output-json", "x"])
        seen.add((where, bench))
    assert {(w, b) for w in ("README.md", "gpu_bench.sh") for b in ("startup", "budget", "throughput")} <= seen
