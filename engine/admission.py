"""Admission on the device: the new sentences' sources encoded together, their rows set up.

All but the last token of each decoder prefix (`</s>` before the language code) is fed to each
sentence's first row in a step without logits, and its other beams take over that row's slots.
From then on the sentence scores at every step. A sentence of several beams with the usual prefix
skips that step: in its first step one beam feeds `</s>` for all while the others feed the
language code (engine/rows.py). Either way each row has `len(prefix) - 1` positions in the cache
once admitted, in blocks taken for all its sentence's rows (engine/scheduler.py counts on that).

These functions are the step runner's (engine/step_runner.py), which they take as `runner`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from dragoman import kernels
from dragoman.engine.cuda_graphs import bucket_for
from dragoman.engine.constraints import MAX_CONSTRAINTS
from dragoman.engine.decoding import BLOCKED, NEG_INF
from dragoman.engine.device import to_device, to_device_many, tokens_to_device
from dragoman.engine.kv_cache import OutOfBlocks, Sequence
from dragoman.engine.lora_layers import LoraRows
from dragoman.engine.model import FOLD_MAX_ROWS, FoldedSources
from dragoman.engine.scheduler import Sentence

if TYPE_CHECKING:
    from dragoman.engine.step_runner import StepRunner

ADMISSION_GRAPH_ROWS = 16  # a sentence admitted alone with at most this many beams sets its rows up by a graph


def fold_slots(runner: StepRunner, sentences: list[Sentence]) -> int:
    """The S at which to fold the source of the sentences admitted to step alone (`Plan.alone`) into
    the cross-attention (FoldedSources), 0 for none: only for one sentence (its steps read the fold
    while it steps alone, `StepRunner._search_in_graph`), with a short source, the base model, and
    few enough rows for one tile of the scores kernel."""
    if runner.folded is None or len(sentences) != 1:
        return 0
    [sentence] = sentences
    request = runner.requests[sentence]
    if request.checked_constraints is not None:
        return 0  # its search runs outside the step's graph, which the fold is for
    if sentence.adapter_slot >= 0 or bucket_for(request.beams) > FOLD_MAX_ROWS:
        return 0
    return FoldedSources.slots_for(len(request.src_ids))


def encode_sources(runner: StepRunner, sources: list[list[int]], adapter_slots: list[int] | None = None,
                   fold: int = 0) -> list[Sequence]:
    """Run the encoder once over the sources and store every decoder layer's cross K/V for each.

    Source i is encoded with the LoRA adapter in `adapter_slots[i]` (-1 or no list: the base model).
    `fold` > 0: the one source's K/V are also folded into `runner.folded` at S = fold (`fold_slots`).
    """
    device, cross_cache = runner.model.device, runner.cross_cache
    lengths = [len(s) for s in sources]
    needed = sum(cross_cache.blocks_for(n) for n in lengths)
    if needed > cross_cache.num_free_blocks():
        raise OutOfBlocks(f"source cache full: {needed} blocks needed, {cross_cache.num_free_blocks()} free")
    if runner.encoder_graphs is not None and len(sources) == 1 and runner.encoder_graphs.fits(lengths[0]):
        seq = Sequence()  # a typed sentence: one graph replay
        cross_cache.extend(seq, lengths[0])
        adapter_slot = adapter_slots[0] if adapter_slots is not None else -1
        runner.encoder_graphs.run(sources[0], cross_cache.slot_list(seq), adapter_slot, fold)
        return [seq]
    # Per token work stays off the host: a document's admission packs tens of thousands of tokens.
    tokens = tokens_to_device(sources, device)  # (T,)
    runner.model.ensure_positions(max(lengths) + runner.pad_id)
    lora = None
    if adapter_slots is not None and max(adapter_slots) >= 0:
        per_source = to_device(adapter_slots, device, torch.int32)
        lora = LoraRows(runner.lora.layers, per_source.repeat_interleave(to_device(lengths, device), output_size=sum(lengths)))  # (T,)
    packed = runner.model.encode(tokens, lengths, lora)  # (T, C), sources one after another
    cross = [Sequence() for _ in sources]
    for seq, n in zip(cross, lengths):
        cross_cache.extend(seq, n)
    kv = runner.model.write_cross_kv(packed, cross_cache, cross_cache.slots_of(cross, device), lora)
    if fold:  # kv (T, L, 2, H, D) of the one source
        assert runner.folded is not None  # fold_slots folds only where there are folded sources
        runner.folded.fold(kv[:, :, 0].transpose(0, 1), kv[:, :, 1].transpose(0, 1),
                           to_device(lengths, device, torch.int32), fold)
    return cross


def _source_columns(sentences: list[Sentence]) -> tuple[list[int], list[list[int]], list[int]]:
    """Per row of the sentences, on the host: its id, its source's block list (padded to the
    widest) and its source's length."""
    sources: list[Sequence] = []
    for s in sentences:
        assert s.source is not None  # encoded (encode_sources) before their rows are set up
        sources.append(s.source)
    widest = max(len(source.blocks) for source in sources)
    rows, blocks, lengths = [], [], []
    for s, source in zip(sentences, sources):
        padded = source.blocks + [0] * (widest - len(source.blocks))
        rows += s.rows
        blocks += [padded] * len(s.rows)
        lengths += [source.length] * len(s.rows)
    return rows, blocks, lengths


def admit_rows(runner: StepRunner, sentences: list[Sentence]) -> torch.Tensor:
    """Set up the new sentences' rows (their sources encoded) and feed their decoder prefixes but
    the last token; returns their rows (R,) int32 on the device, sentence by sentence.

    A sentence of several beams whose prefix is `</s>` and the language code feeds nothing here:
    its beam 1 feeds `</s>` in the sentence's first step (engine/rows.py). What each row needs is
    gathered on the host and goes to the device in one copy (each copy costs the host as much as
    a small kernel's launch)."""
    device, state = runner.model.device, runner.rows
    prefixes_of = {s: runner.requests[s].prefix for s in sentences}
    widest = max(len(prefix) for prefix in prefixes_of.values())
    rows, source_blocks, source_lengths = _source_columns(sentences)
    # Each row's first block, for the sentences that feed position 0 here or in their first step.
    with_start = [s for s in sentences if len(prefixes_of[s]) > 1]
    first_block = dict(zip(*runner.take_blocks(with_start)))
    first_blocks = [first_block.get(r, -1) for r in rows]
    # Beam 1's candidates stay out of the first search only while beam 0 alone has the 2B + 1 it
    # keeps: any real vocabulary.
    opening = [len(prefixes_of[s]) == 2 and 1 < len(s.rows) and 2 * len(s.rows) + 1 < runner.vocab_size
               for s in sentences]
    prefixes: list[list[int]] = []
    beams: list[int] = []
    adapters: list[int] = []
    prior_offsets: list[int] = []
    limits: list[int] = []
    for s, opens in zip(sentences, opening):
        prefix = prefixes_of[s]
        prefixes += [prefix + [runner.pad_id] * (widest - len(prefix))] * len(s.rows)
        beams += range(len(s.rows))
        adapters += [s.adapter_slot] * len(s.rows)
        limits += [runner.requests[s].limit] * len(s.rows)
        prior_offsets += [1 - b if opens and b != 1 else 0 for b in range(len(s.rows))]  # to beam 1's place
    # The sentences fed here: the first row of each feeds all but the last token of its prefix.
    fed = [s for s, opens in zip(sentences, opening) if not opens]
    leads = [s.rows[0] for s in fed]
    others = [r for s in fed for r in s.rows[1:]]
    others_leads = [s.rows[0] for s in fed for _ in s.rows[1:]]
    per_row: list[list] = [rows, prefixes, beams, adapters, first_blocks, prior_offsets, source_blocks, source_lengths, limits]
    lists = per_row + [leads, others, others_leads]

    def set_up(*inputs: torch.Tensor) -> None:
        # One launch: as ~16 tensor ops the host took longer than a typed sentence's encoder.
        admitted = kernels.AdmittedRows(*inputs[: len(per_row)])
        kernels.admit_rows(admitted, state.tensors, runner.self_cache.block_size, BLOCKED)

    if runner.admission_graphs is not None and len(sentences) == 1 and len(rows) <= ADMISSION_GRAPH_ROWS:
        inputs = runner.admission_graphs.run(lists, set_up)  # a typed sentence
    else:
        inputs = to_device_many(lists, device)
        set_up(*inputs)
    rows_t, leads_t, others_t, others_leads_t = inputs[0], *inputs[len(per_row):]
    leads_t = leads_t.long()  # the step takes int64 rows
    with_lora = any(s.adapter_slot >= 0 for s in fed)
    for position in range(widest - 1):
        feeding = [s for s in fed if position < len(prefixes_of[s]) - 1]
        if not feeding:
            break
        if position > 0:  # (blocks for position 0 were taken above)
            runner.grow(feeding)
        if len(feeding) == len(fed):
            runner.run_rows(leads_t, with_lora, with_logits=False)
        else:
            runner.run_rows(to_device([s.rows[0] for s in feeding], device), with_lora, with_logits=False)
        for s in feeding:
            s.cached += 1
    if others:  # the other beams take over the first row's slots
        state.kv_slots[others_t] = state.kv_slots[others_leads_t]
        state.kv_len[others_t] = state.kv_len[others_leads_t]
    for s, opens in zip(sentences, opening):
        if opens:
            s.cached = 1  # as the host counts blocks: `</s>` is in its first blocks' slots already
    start_constraints(runner, [s for s in sentences if runner.requests[s].checked_constraints is not None])
    return rows_t


def start_constraints(runner: StepRunner, sentences: list[Sentence]) -> None:
    """A constrained sentence's search starts from one hypothesis: its other rows score -inf (none),
    and every row meets of each constraint what the decoder prefix meets (engine/constrained_search.py)."""
    if not sentences:
        return
    rows, met, scores = [], [], []
    for s in sentences:
        request = runner.requests[s]
        constraints = request.checked_constraints
        assert constraints is not None  # the caller's: its constrained sentences
        start = list(constraints.start(request.prefix))
        rows += s.rows
        met += [start + [0] * (MAX_CONSTRAINTS - len(start))] * len(s.rows)
        scores += [0.0] + [NEG_INF] * (len(s.rows) - 1)
    device, state = runner.model.device, runner.rows
    rows_t = to_device(rows, device, torch.int64)
    state.met[rows_t] = to_device(met, device, torch.int32)
    state.score[rows_t] = to_device(scores, device, torch.float32)
