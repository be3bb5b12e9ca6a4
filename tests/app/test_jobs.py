"""app/jobs.py: how a document job feeds the engine."""

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import torch

from app.documents import segments
from app.jobs import DocumentJob, sentences_a_call
from engine.translator import Translator


def test_a_document_job_hands_a_gpu_four_waves_of_sentences_a_call(tiny_checkpoint, monkeypatch):
    cpu = Translator(tiny_checkpoint, device="cpu", dtype="float32")
    job = DocumentJob(Path("in.txt"), Path("out.txt"), "eng_Latn", "fra_Latn", options={"num_beams": 4})
    monkeypatch.setattr(segments, "BATCH_SENTENCES", 7)
    assert sentences_a_call(cpu, job) == 7
    # No GPU here: what the rule reads of a GPU translator, its generator's rows as Translator gives them there.
    monkeypatch.setattr(cpu.generator, "max_rows", 2048)
    gpu = SimpleNamespace(device=torch.device("cuda"), default_options=cpu.default_options, generator=cpu.generator)
    assert sentences_a_call(gpu, job) == 4 * 512
    assert sentences_a_call(gpu, replace(job, options={"num_beams": 1})) == 4 * 2048
    assert sentences_a_call(gpu, replace(job, options={})) == 4 * 2048 // cpu.default_options().num_beams
