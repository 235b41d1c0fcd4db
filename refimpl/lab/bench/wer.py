"""``refimpl bench wer``: WER of the real whisper-tiny.en weights on the speech clips (greedy
generate(), jiwer, Whisper's English normaliser): checks the CTranslate2 conversion end to end."""
from __future__ import annotations

import json
from importlib import resources

import jiwer
from transformers.models.whisper.english_normalizer import EnglishTextNormalizer

from refimpl.audio import load_speech_clips
from refimpl.config import ModelConfig
from refimpl.lab.bench.common import set_single_thread
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import WerSpec
from refimpl.lab.env import result_env
from refimpl.multimodal.whisper import build_hf_processor
from refimpl.tokenizer import get_tokenizer, whisper_decoder_prompt
from refimpl.worker.hf_reference import hf_greedy_generate
from refimpl.worker.model_loader import get_model

__all__ = ["MODEL", "clip_references", "transcribe_clips", "word_error_rates", "run_once", "result"]

MODEL = WerSpec().model
normalize = EnglishTextNormalizer({})


def clip_references() -> dict[str, str]:
    """{clip name: the sentence it was synthesised from} (clips.json)."""
    clips = json.loads(resources.files("refimpl").joinpath("data", "speech", "clips.json").read_text())
    return {c["file"].rsplit(".", 1)[0]: c["text"] for c in clips}


def transcribe_clips(model=None, max_new_tokens: int = 64) -> dict[str, list[int]]:
    """Greedy token ids (EOS included) per clip in one batch; ``model`` defaults to the real weights."""
    model = model if model is not None else get_model(ModelConfig(MODEL, device="cpu"))
    clips, fe = load_speech_clips(), build_hf_processor(MODEL).feature_extractor
    feats = fe([a for _, a in clips], sampling_rate=fe.sampling_rate, return_tensors="pt")["input_features"]
    rows = hf_greedy_generate(model, feats.to(model.dtype), whisper_decoder_prompt(MODEL), max_new_tokens,
                              stop_at_eos=True)
    return {name: r for (name, _), r in zip(clips, rows)}


def word_error_rates(tokens: dict[str, list[int]]) -> dict:
    """{"clips": [{"clip", "reference", "hypothesis", "wer", "tokens" (generated)}], "corpus_wer" (all words
    pooled)}."""
    tok, refs, rows = get_tokenizer(MODEL), clip_references(), []
    for name, ids in tokens.items():
        hyp = tok.decode(ids, skip_special_tokens=True)
        rows.append({"clip": name, "reference": refs[name], "hypothesis": hyp.strip(),
                     "wer": jiwer.wer(normalize(refs[name]), normalize(hyp)), "tokens": len(ids)})
    corpus = jiwer.wer([normalize(r["reference"]) for r in rows], [normalize(r["hypothesis"]) for r in rows])
    return {"clips": rows, "corpus_wer": corpus}


def run_once(spec: WerSpec, label: str) -> dict:
    set_single_thread()
    return word_error_rates(transcribe_clips(max_new_tokens=spec.max_new_tokens))


def result(spec: WerSpec, trial, in_process: bool) -> Result:
    done = trial.runs[MODEL]
    variant = {"runs": done[0]["clips"], "summary": {"corpus_wer": done[0]["corpus_wer"]}} if done else \
        {"runs": [], "summary": {}}
    return Result("wer", result_env(trial.runs, "cpu", True), {**spec.params(), **trial.stop}, {MODEL: variant},
                  missing=[] if done else ["runs"])

