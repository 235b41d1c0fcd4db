"""Word error rate of real Whisper tiny.en weights on the shipped speech clips.

    refimpl bench wer [--max-new-tokens 64] [--output-json wer.json]

Checks the CTranslate2 weight conversion (worker/ct2_loader.py) end to end: transformers'
generate() (plain greedy, stopping at EOS, decoder prompt <|startoftranscript|><|notimestamps|>)
transcribes each clip of refimpl/data/speech, and jiwer scores it against the sentence the
clip was synthesised from (clips.json). Both texts go through Whisper's own English text
normaliser (transformers' ``EnglishTextNormalizer``: lower case, no punctuation, spelled
numbers to digits), as Whisper's published WER figures do. Not a vLLM benchmark: the
correctness check behind every real-weight figure of the throughput study. In Python:
``run(WerSpec(max_new_tokens=64))``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import ClassVar

from refimpl.bench.cli_spec import CliSpec, arg, check_max_tokens
from refimpl.bench.common import set_single_thread

MODEL = "whisper-tiny.en"


def normalize(text: str) -> str:
    """Whisper's English normaliser (transformers), with no extra spelling map."""
    from transformers.models.whisper.english_normalizer import EnglishTextNormalizer
    return EnglishTextNormalizer({})(text)


def clip_references() -> dict[str, str]:
    """{clip name (file stem): the sentence it was synthesised from}."""
    clips = json.loads(resources.files("refimpl").joinpath("data", "speech", "clips.json").read_text())
    return {c["file"].rsplit(".", 1)[0]: c["text"] for c in clips}


def transcribe_clips(model=None, max_new_tokens: int = 64) -> dict[str, list[int]]:
    """Greedy token ids (EOS included) per shipped clip with transformers' generate().

    ``model``: a WhisperForConditionalGeneration of whisper-tiny.en (default: the real weights
    via ``get_model``). One static batch of all clips (all are padded to 3000 mel frames by
    the feature extractor, so batching changes nothing). Returns {clip name: token ids}.
    """
    from refimpl.audio import load_speech_clips
    from refimpl.config import ModelConfig
    from refimpl.multimodal.whisper import build_hf_processor
    from refimpl.tokenizer import whisper_decoder_prompt
    from refimpl.worker.hf_reference import hf_greedy_generate
    from refimpl.worker.model_loader import get_model
    if model is None:
        model = get_model(ModelConfig(MODEL, device="cpu"))
    clips = load_speech_clips()
    fe = build_hf_processor(MODEL).feature_extractor
    feats = fe([a for _, a in clips], sampling_rate=fe.sampling_rate, return_tensors="pt")["input_features"]
    rows = hf_greedy_generate(model, feats.to(model.dtype), whisper_decoder_prompt(MODEL),
                              max_new_tokens, stop_at_eos=True)
    return {name: r for (name, _), r in zip(clips, rows)}


def word_error_rates(tokens: dict[str, list[int]]) -> dict:
    """Per-clip and pooled WER (jiwer) of decoded ``tokens`` against clips.json.

    Returns {"clips": [{"clip", "reference", "hypothesis", "wer"}], "corpus_wer"}; WER is
    (substitutions + deletions + insertions) / reference words after ``normalize``; the
    corpus figure pools the words of all clips.
    """
    import jiwer

    from refimpl.tokenizer import get_tokenizer
    tok, refs = get_tokenizer(MODEL), clip_references()
    rows = []
    for name, ids in tokens.items():
        hyp = tok.decode(ids, skip_special_tokens=True)
        rows.append({"clip": name, "reference": refs[name], "hypothesis": hyp.strip(),
                     "wer": jiwer.wer(normalize(refs[name]), normalize(hyp))})
    corpus = jiwer.wer([normalize(r["reference"]) for r in rows], [normalize(r["hypothesis"]) for r in rows])
    return {"clips": rows, "corpus_wer": corpus}


@dataclass(frozen=True, kw_only=True)
class WerSpec(CliSpec):
    """``refimpl bench wer``: the decoding cap (tokens per clip, EOS stops earlier)."""
    prog: ClassVar[str] = "refimpl bench wer"
    max_new_tokens: int = arg(64, "cap per clip; EOS stops earlier", min=1)

    def __post_init__(self):
        super().__post_init__()
        check_max_tokens("max_new_tokens", self.max_new_tokens, MODEL)

    def params(self) -> dict:
        """The Result's ``params``: the model, its one variant, ``max_new_tokens``."""
        return {"model": MODEL, "variants": [MODEL], **super().params()}


Spec = WerSpec


def run(spec: WerSpec = WerSpec()):
    """Transcribe the clips and score them; the schema's Result (variant = the model, runs =
    per-clip WER, summary = corpus WER)."""
    from refimpl.bench.schema import Result
    from refimpl.env import collect_env
    threads = set_single_thread()
    res = word_error_rates(transcribe_clips(max_new_tokens=spec.max_new_tokens))
    env = {**collect_env(), "device": "cpu", "in_process": True, "torch_num_threads": threads}
    return Result("wer", env, spec.params(),
                  {MODEL: {"runs": res["clips"], "summary": {"corpus_wer": res["corpus_wer"]}}})


def main(argv: list[str] | None = None) -> int:
    spec, output_json = WerSpec.from_argv(argv)
    out = run(spec)
    for r in out.runs(MODEL):
        print(f"{r['clip']:16s} WER {r['wer']:.3f}  ref: {r['reference']}\n{'':26s}hyp: {r['hypothesis']}")
    print(f"corpus WER {out.variants[MODEL]['summary']['corpus_wer']:.3f}")
    if output_json:
        out.write(output_json)
    return 0
