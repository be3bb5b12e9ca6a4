"""Running the per-sentence reference searches (engine/decoding.py, engine/constraints.py) on a
scoring function: a toy one of the history alone, or transformers' model of the tiny checkpoint."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dragoman.engine.constraints import search_scores
from dragoman.engine.decoding import process_scores


def toy_logits(vocab: int, eos: int):
    """logits_of(histories) -> (R, vocab): random scores that depend on each history alone, with
    `</s>` growing likelier as a history grows, so that searches end on their own."""

    def logits_of(histories: list[list[int]]) -> torch.Tensor:
        rows = []
        for history in histories:
            seed = hash(tuple(history)) % 2**31  # ints hash alike in every process
            row = torch.randn(vocab, generator=torch.Generator().manual_seed(seed)) * 3
            row[eos] += len(history) - 8
            rows.append(row)
        return torch.stack(rows)

    return logits_of


def model_logits(hf_model, hf_tokenizer, text: str, src_lang: str):
    """logits_of(histories) -> (R, vocab): transformers' next-token logits of `text`'s translation
    for each decoder input (all of one length), the encoder run once."""
    from transformers.modeling_outputs import BaseModelOutput

    hf_tokenizer.src_lang = src_lang
    inputs = hf_tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        encoded = hf_model.get_encoder()(**inputs).last_hidden_state  # (1, S, C)

    def logits_of(histories: list[list[int]]) -> torch.Tensor:
        R = len(histories)
        with torch.no_grad():
            out = hf_model(
                encoder_outputs=BaseModelOutput(last_hidden_state=encoded.expand(R, -1, -1)),
                attention_mask=inputs["attention_mask"].expand(R, -1),
                decoder_input_ids=torch.tensor(histories),
            )
        return out.logits[:, -1].float()

    return logits_of


def hf_generate(hf_model, hf_tokenizer, text: str, src_lang: str, tgt_lang: str, **options) -> list[list[int]]:
    """transformers' `generate` of `text`'s translation: its sequences, padding removed."""
    hf_tokenizer.src_lang = src_lang
    inputs = hf_tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = hf_model.generate(**inputs, forced_bos_token_id=hf_tokenizer.convert_tokens_to_ids(tgt_lang),
                                do_sample=False, **options)
    sequences = []
    for ids in out.tolist():
        while ids[-1] == hf_tokenizer.pad_token_id:
            ids.pop()
        sequences.append(ids)
    return sequences


def beam_step(search, logits_of, eos: int) -> None:
    """One step of a BeamSearch: each live beam's top 2B of (processed log-prob + beam score)."""
    options = search.options
    log_probs = process_scores(F.log_softmax(logits_of(search.live), dim=-1), search.live, options, eos)
    scores = log_probs + torch.tensor([b.score for b in search.beams])[:, None]
    top, tokens = scores.topk(2 * options.num_beams, dim=-1)
    search.advance(top.tolist(), tokens.tolist())


def greedy_step(search, logits_of, eos: int) -> None:
    scores = process_scores(logits_of(search.live), search.live, search.options, eos)
    search.advance(int(scores.argmax()))


def constrained_step(search, logits_of, eos: int) -> None:
    search.advance(search_scores(logits_of(search.live), search.live, search.options, eos))


def run(search, step, logits_of, eos: int):
    """`search` stepped until it is done; returns it."""
    while not search.done:
        step(search, logits_of, eos)
    return search
