"""refimpl conform's comparison on recorded probe output (no vLLM here: installing it stays out of
the fast suite). The fixture holds lines that vLLM 0.11.0 answered on this machine
(results/conformance/vllm-0.11.0/probe.jsonl, a sample of its settings)."""
import ast
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from refimpl.errors import ConfigError, InsufficientMemoryError
from refimpl.lab.conform import compare as C
from refimpl.lab.conform import memory, side
from refimpl.lab.conform.cli import main
from refimpl.lab.conform.grid import qwen_settings, whisper_settings
from refimpl.lab.conform.table import write_docs_table

FIXTURE = Path(__file__).parent / "data" / "vllm-0.11.0-sample.jsonl"
# vLLM 0.9.0's probe lines with the start-up phases (issue 45), a sample of its settings
FIXTURE_090 = FIXTURE.with_name("vllm-0.9.0-sample.jsonl")


@pytest.fixture(scope="module")
def lines():
    return [json.loads(x) for x in FIXTURE.read_text().splitlines()]


def _settings(lines):
    return [ln for ln in lines if ln.get("kind") in ("qwen", "whisper")]


def test_the_grid_is_the_issue_s():
    full = [s for s in qwen_settings() if not s.get("lookup_only")]
    assert len(full) == 96 and len({s["id"] for s in full}) == 96
    off = [s for s in full if s.get("disable_mm_preprocessor_cache")]
    assert len(off) == 24 and {s["max_model_len"] for s in off} == {4096} and all("cache-off" in s["id"] for s in off)
    assert [s["max_model_len"] for s in qwen_settings() if s.get("lookup_only")] == [32768, 65536, 128000]
    assert len(whisper_settings()) == 2


def test_recorded_0_11_0_equals_its_row(lines):
    tally, diffs = C.compare(lines, "0.11.0")
    assert C.failures(diffs) == []
    assert all(eq == n for eq, n in tally.values()), tally
    assert {"max_tokens_per_item", "profile.seq_len", "profile.raw_dtype", "hf_passes",
            "cross_attention_blocks"} <= set(tally)


def test_a_neighbouring_row_fails(lines):
    """0.10.2 built the profile dummy at max_num_batched_tokens, 0.11.1 an uint8 video: the grid sees both."""
    fields = {row: {d.field for d in C.failures(C.compare(lines, row)[1])} for row in ("0.10.2", "0.11.1")}
    assert "profile.seq_len" in fields["0.10.2"]
    assert "profile.raw_dtype" in fields["0.11.1"]


def test_a_changed_value_and_a_missing_internal_fail(lines):
    changed = copy.deepcopy(lines)
    q = next(ln for ln in changed if ln.get("kind") == "qwen" and "profile" in ln)
    q["max_tokens_per_item"]["image"] += 1
    q["profile"] = {"not_probed": "AttributeError: GPUModelRunner has no _get_mm_dummy_batch"}
    bad = C.failures(C.compare(changed, "0.11.0")[1])
    assert {d.field for d in bad} >= {"max_tokens_per_item", "profile.seq_len", "profile.raw_shape"}
    assert all(d.setting == q["setting"]["id"] for d in bad)


def test_known_differences_are_named_and_only_those(lines):
    swapped = copy.deepcopy(lines)
    q = next(ln for ln in swapped if ln.get("kind") == "qwen" and ln.get("profile", {}).get("modality") == "video")
    raw = q["profile"]["raw"][-1]
    t, h, w, c = raw["shape"]
    raw["shape"] = [t, h + 28, w, c]  # not square: vLLM's (T, W, H, 3) against the kit's (T, H, W, 3)
    want = C.expected(q["setting"], "0.11.0")["profile.raw_shape"]
    assert C._transposed(q["setting"], "profile.raw_shape", [t, w, h, c], [t, h, w, c], "0.11.0")
    diffs = C.compare(swapped, "0.11.0")[1]
    assert [d.known for d in diffs] == [None] and diffs[0].want == want  # h + 28 is not a transpose


def test_nearest_row_for_a_build_of_unknown_version(lines):
    ranking = C.nearest(lines, C.release_rows())
    assert ranking[0][:2] == ("0.11.0", 0)
    assert all(n > 0 for _, n, _ in ranking[1:])


def test_cli_from_recorded_lines(tmp_path, lines, capsys):
    assert main(["--from-jsonl", str(FIXTURE), "--out", str(tmp_path)]) == 0
    assert "against the row 0.11.0" in capsys.readouterr().out
    bad = copy.deepcopy(lines)
    next(ln for ln in bad if ln.get("kind") == "qwen")["encoder_budget"] = [1, 1]
    p = tmp_path / "bad.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in bad))
    assert main(["--from-jsonl", str(p), "--out", str(tmp_path)]) == 1
    partial = tmp_path / "partial.jsonl"  # Ctrl-C: no end line, never a pass
    partial.write_text("".join(json.dumps(x) + "\n" for x in lines if x.get("kind") != "end"))
    assert main(["--from-jsonl", str(partial), "--out", str(tmp_path)]) == 1


def test_pins_and_disk_guard(tmp_path, monkeypatch):
    table = side.pins_table()
    assert {"0.9.2", "0.10.2", "0.11.0", "0.11.1", "0.13.0", "0.14.0"} <= set(table)
    assert table["0.11.0"].requirements()[:2] == ["vllm==0.11.0", "transformers==4.56.2"]
    with pytest.raises(ConfigError) as e:
        side.get_pins("0.1.0")
    assert e.value.field == "vllm"
    with pytest.raises(ConfigError) as e:
        side.check_disk(tmp_path, need=1 << 62)
    assert e.value.field == "disk" and "GB free" in str(e.value)


@pytest.mark.parametrize("name", ["probe.py", "probe_profile.py", "probe_configs.py", "probe_memory.py"])
def test_probe_stands_alone(name):
    """The probe runs in vLLM's interpreter: it imports nothing of refimpl nor refimpl's own deps
    (only its own sibling files, beside it)."""
    tree = ast.parse(Path(side.PROBE).with_name(name).read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
    assert names <= {"__future__", "dataclasses", "inspect", "json", "os", "sys", "traceback", "importlib",
                     "resource", "threading", "time", "vllm", "transformers", "torch", "probe_profile",
                     "probe_configs", "probe_memory"}, names


def test_the_probe_runs_as_a_script_from_its_folder(tmp_path):
    """``python probe.py SPEC`` finds probe_profile.py beside it with no PYTHONPATH of refimpl's
    (a stand-in vllm package here: meta, the counters installed, no settings)."""
    profiling = tmp_path / "vllm" / "multimodal" / "profiling.py"
    profiling.parent.mkdir(parents=True)
    (tmp_path / "vllm" / "__init__.py").write_text("__version__ = 'stand-in'\n")
    (profiling.parent / "__init__.py").write_text("")
    profiling.write_text("class BaseDummyInputsBuilder:\n"
                         "    @staticmethod\n    def _get_dummy_images(*a): return []\n"
                         "    @staticmethod\n    def _get_dummy_videos(*a): return []\n")
    spec = tmp_path / "spec.json"
    spec.write_text("{}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(side.PROBE), str(spec)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [x["kind"] for x in lines] == ["meta", "end"] and lines[0]["vllm_module"] == "stand-in"


def test_docs_table_is_the_committed_results():
    root = Path(__file__).resolve().parents[3]
    assert write_docs_table(root / "docs" / "conformance.md", root / "results" / "conformance", check=True), \
        "docs/conformance.md's table is stale: run refimpl conform --table"


def test_whisper_is_compared_only_under_an_encoder_length_row(lines):
    """0.9.2 ran Whisper on V0 only: no encoder-length row, so its Whisper lines are not compared
    (its Qwen lines are); from 0.10.2 each Whisper field is."""
    tally_092 = C.compare(lines, "0.9.2")[0]
    assert "cross_attention_blocks" not in tally_092 and "max_tokens_per_item" in tally_092
    assert C.compare(lines, "0.10.2")[0]["cross_attention_blocks"][1] == 2


@pytest.fixture(scope="module")
def lines_090():
    return [json.loads(x) for x in FIXTURE_090.read_text().splitlines()]


def test_0_9_0_equals_its_row_phase_by_phase(lines_090):
    """Every start-up field of every phase is compared; the video cache bytes differ by exactly 20
    per video item held (known; two where the profile dummy is a second video), nothing else."""
    tally, diffs = C.compare(lines_090, "0.9.0")
    assert C.failures(diffs) == []
    fields = {f for f in tally if f.startswith("startup.")}
    assert {f"startup.{p}.{c}" for p in C.oracles.CACHE_PHASES for c in C.STARTUP_GROUPS} == fields
    assert {d.known for d in diffs} == {"video cache bytes"}
    settings = {ln["setting"]["id"]: ln["setting"] for ln in lines_090 if ln.get("kind") == "qwen"}
    held = [C.expected(settings[d.setting], "0.9.0")[d.field.replace("cache_bytes", "cache_entries_by_modality")]
            for d in diffs]
    assert all(d.field.endswith("cache_bytes") and d.got - d.want == 20 * h["video"] for d, h in zip(diffs, held))
    assert {h["video"] for h in held} == {1, 2}
    video = {ln["setting"]["id"] for ln in lines_090 if ln.get("kind") == "qwen" and "startup" in ln
             and ln["startup"]["runner_init"]["cache_entries_by_modality"].get("video")}
    assert {d.setting for d in diffs} == video


def test_a_changed_cache_count_fails(lines_090):
    for phase, counter, delta in (("profile_run", "cache_hits", 1), ("reset_mm_cache", "cache_entries", 1),
                                  ("runner_init", "cache_bytes", 21), ("scheduler_init", "hf_calls_text_only", -1)):
        changed = copy.deepcopy(lines_090)
        q = next(ln for ln in changed if ln.get("kind") == "qwen" and "startup" in ln)
        q["startup"][phase][counter] += delta
        bad = C.failures(C.compare(changed, "0.9.0")[1])
        assert [(d.setting, d.field) for d in bad] == [(q["setting"]["id"], f"startup.{phase}.{counter}")]
    assert C.failures(C.compare(lines_090, "0.8.5")[1])  # 0.8.5 caches nothing: the 0.9.0 lines fail it


def test_lines_recorded_before_the_phases_are_not_compared_on_them(lines):
    tally, _ = C.compare(lines, "0.11.0")
    assert not any(f.startswith("startup.") for f in tally)


def test_nothing_probed_names_no_row(tmp_path, lines_090, capsys):
    failed = [{"kind": ln["kind"], "setting": ln["setting"], "_model_config": {"not_probed": "TypeError: missing task"}}
              if ln.get("kind") in ("qwen", "whisper") else ln for ln in lines_090]
    failed[0] = {**failed[0], "vllm": "9.9.9"}
    assert C.nearest(failed, C.release_rows()) == []
    p = tmp_path / "failed.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in failed))
    assert main(["--from-jsonl", str(p), "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "against no row" in out and "none named" in out and "TypeError: missing task" in out
    assert "0.11.1" not in out


def test_the_memory_guard_names_the_setting_before_anything_runs():
    """The kit's memory model prices 0.9.0's lookups: the 128k lookup-only setting is the largest;
    a machine smaller than it is refused naming it; the quick grid fits."""
    grid = qwen_settings()
    peaks = {s["id"]: memory.predicted_peak(s, "0.9.0")[0] for s in grid}
    top = max(peaks, key=peaks.get)
    assert top == "qwen 128000 i1v1 px=default b8192 lookup-only"
    assert peaks[top] > peaks["qwen 65536 i1v1 px=default b8192 lookup-only"] > peaks["qwen 4096 i1v1 px=default b2048"]
    assert peaks[top] > memory.predicted_peak(grid[-1], "0.8.5")[0]  # 0.8.5 does not hash
    with pytest.raises(InsufficientMemoryError) as e:
        memory.check_grid(grid, "0.9.0", total=peaks[top] - 1)
    assert e.value.field == "setting" and top in str(e.value)
    assert memory.check_grid(qwen_settings(quick=True), "0.9.0", total=peaks[top] - 1)
