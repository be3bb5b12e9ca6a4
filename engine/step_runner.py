"""The step runner: the device side of decoding, which executes what the scheduler plans.

It owns every live row's state (`DecoderRows`), the two KV caches and the CUDA graphs. Each step
feeds every row the newest token of its hypothesis through one decoder step (a CUDA graph on the
GPU), then the searches of all sentences that share decoding options advance together as a few
tensor operations (engine/batched_search.py). The host does a fixed amount of work per options
group and a little integer bookkeeping per sentence: nothing per row. Each step ends by storing
what the host reads of it in host memory (kernels.step_report): which sentences are done, their
results, and the best hypotheses of those that stream partial results.

Admission (engine/admission.py) encodes the new sentences' sources and sets up their rows.

A typed sentence (admitted to step alone: into an empty batch, or beside documents, which sit its
steps out; a short source, the base model, half precision on the GPU) has its source folded into
every layer's cross-attention as the encoder's graph ends (engine.model.FoldedSources), and its
steps score against that instead of reading the source cache, while no other sentence steps with
it (`fold_slots`, `_search_in_graph`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, cast
from weakref import WeakKeyDictionary

import torch

from dragoman import kernels
from dragoman.engine import admission
from dragoman.engine.batched_search import greedy_step, search_step
from dragoman.engine.constrained_search import ConstraintTables, constrained_step
from dragoman.engine.cuda_graphs import AdmissionGraphs, DecodeGraphs, EncoderGraphs, bucket_for, step_bucket_for
from dragoman.engine.decoding import NEG_INF, DecodingOptions, bans_only_eos
from dragoman.engine.device import to_device, to_device_many
from dragoman.engine.kv_cache import PagedKVCache
from dragoman.engine.lora_layers import LoraRows
from dragoman.engine.lora_pool import LoraPool
from dragoman.engine.model import FoldedSources, NllbModel
from dragoman.engine.rows import DecoderRows
from dragoman.engine.scheduler import Group, Sentence

if TYPE_CHECKING:
    from dragoman.engine.generator import Request


# A constrained search's step launches a few hundred small ops, more host time than a document
# step's decoder takes on a GPU: a constrained group alone in a step is one graph up to this many
# rows (its tensors are small: no full-vocabulary copies). bench.constraints measures other limits.
GRAPHED_CONSTRAINED_ROWS = 4096


@dataclass
class LaunchedStep:
    """A step queued on the device: the sentences it advanced and, once the device has run it, which
    of them are done and the current best hypothesis of those that stream partial results."""

    sentences: list[Sentence]
    lengths: list[int]  # their hypotheses' lengths after the step
    report: kernels.StepReport  # host memory the device fills (kernels.step_report), for these sentences
    partial: list[int]  # the sentences that stream partial results, as indices into `sentences`
    ready: torch.cuda.Event | None  # recorded after the step; None on the CPU


class StepRunner:
    def __init__(self, model: NllbModel, self_cache: PagedKVCache, cross_cache: PagedKVCache, capacity: int,
                 lora: LoraPool, folded: FoldedSources | None = None, graphed: bool = False):
        """Rows for `capacity` at once. `graphed`: decoder steps (and, on CUDA, a lone sentence's
        admission) run through CUDA graphs; on the CPU that path runs eagerly, padded as on the GPU.
        `folded`: a lone short sentence's cross-attention by associativity (`FoldedSources`)."""
        assert self_cache.block_size == cross_cache.block_size, "admission sets up both caches' slots with one size"
        self.model = model
        self.self_cache = self_cache
        self.cross_cache = cross_cache
        self.lora = lora
        # A source takes whole blocks of the cross cache: its slots run to the last block's end.
        source_slots = -(-model.max_positions // cross_cache.block_size) * cross_cache.block_size
        self.rows = DecoderRows(capacity, model.max_positions, source_slots, model.device)
        self.eos_id = model.config.eos_id
        self.pad_id = model.config.pad_id
        self.vocab_size = model.config.vocab_size
        # A lone short sentence's source folded into the cross-attention (`fold_slots`), and that sentence.
        self.folded = folded
        self.folded_sentence: Sentence | None = None
        # Host memory the steps report into (`_report_memory`), by graph key, or for steps that are not
        # one graph by ("eager", bucket, parity).
        self._reports: dict[tuple, kernels.StepReport] = {}
        # Constrained groups' tables as their graphs read them (`_graph_tables`), by shape: the
        # buffers, and the tables last copied in.
        self._static_tables: dict[tuple, tuple[ConstraintTables, ConstraintTables | None]] = {}
        # Each running sentence's request (the scheduler's records hold counts only): its tokens,
        # options, constraints and callbacks, and where its results go.
        self.requests: dict[Sentence, Request] = {}
        # What the runner keeps of each running group (the scheduler's records hold no tensors and
        # no options): its decoding options (`options`), its rows (`group_rows`) as of the group's
        # version, its constraints' tables (`_tables`) with the sentences they were made for. Gone
        # with the group.
        self._group_options: WeakKeyDictionary[Group, DecodingOptions] = WeakKeyDictionary()
        self._group_rows: WeakKeyDictionary[Group, tuple[int, torch.Tensor]] = WeakKeyDictionary()
        self._group_tables: WeakKeyDictionary[Group, tuple[list[Sentence], ConstraintTables]] = WeakKeyDictionary()
        self._parity = 0
        self.padding_cross_slot = self._prepare_padding_row()
        self.graphs: DecodeGraphs | None = None
        self.encoder_graphs: EncoderGraphs | None = None
        self.admission_graphs: AdmissionGraphs | None = None
        if graphed:
            device = model.device
            self.graphs = DecodeGraphs(capacity, self.rows.padding_row, device, lora.layers)
            # A sentence's inputs: per row 10 ints, its prefix and its source's block list, each at most max_positions.
            block_size = self_cache.block_size
            per_row = 10 + model.max_positions + -(-model.max_positions // block_size)
            self.admission_graphs = AdmissionGraphs(lora.layers, device, admission.ADMISSION_GRAPH_ROWS * per_row)
            if device.type == "cuda" and model.attends_packed():
                self.encoder_graphs = EncoderGraphs(model, cross_cache, lora.layers, self.padding_cross_slot, folded)

    def _prepare_padding_row(self) -> int:
        """The padding row (a captured step's padding, and every row of a sentence sitting a step
        out, with or without graphs) writes into a block no sentence owns and reads one slot of
        another, the source cache's padding slot, which it returns (padding sources write there)."""
        padding_row = self.rows.padding_row
        self.rows.write_block[padding_row] = self.self_cache.reserve_padding_block()
        cross_slot = self.cross_cache.reserve_padding_block() * self.cross_cache.block_size
        self.rows.cross_slots[padding_row, 0] = cross_slot
        self.rows.cross_len[padding_row] = 1
        return cross_slot

    # -- admission and release -----------------------------------------------------------------------

    def admit(self, sentences: list[Sentence], requests: list[Request], alone: bool, group: Group) -> None:
        """Encode the new sentences' sources (`requests`, one each), set up their rows and feed their
        decoder prefixes but the last token. `alone`: they step with no other sentence (`Plan.alone`);
        `group`: the group of the first. Out of GPU memory, raises with everything they took given back."""
        self.requests.update(zip(sentences, requests))
        fold = admission.fold_slots(self, sentences) if alone else 0
        try:
            crosses = admission.encode_sources(self, [r.src_ids for r in requests],
                                               [s.adapter_slot for s in sentences], fold)
            for sentence, request, cross in zip(sentences, requests, crosses):
                sentence.source = cross
                sentence.rows = self.rows.take_rows(request.beams)
            rows = admission.admit_rows(self, sentences)
        except torch.cuda.OutOfMemoryError:
            for sentence in reversed(sentences):
                self.release(sentence)
            raise
        if len(sentences) == 1 and len(group.sentences) == 1:  # a sentence alone: no second copy of its rows
            self._group_rows[group] = (group.version, rows.view(1, -1).long())
        if fold:
            self.folded_sentence = sentences[0]

    def release(self, sentence: Sentence) -> None:
        """A sentence that has left (finished, preempted or stopped) gives back its rows, blocks,
        source and adapter slot."""
        self._give_back(sentence)
        self.lora.release_adapter_slot(sentence.adapter_slot)
        sentence.adapter_slot = -1
        self.requests.pop(sentence, None)

    def _give_back(self, sentence: Sentence) -> None:
        if sentence is self.folded_sentence:
            self.folded_sentence = None
        self.self_cache.give_back(sentence.blocks)
        self.rows.give_back(sentence.rows)
        sentence.blocks, sentence.rows, sentence.cached = [], [], 0
        if sentence.source is not None:
            self.cross_cache.free_sequence(sentence.source)
            sentence.source = None

    def shrink(self, max_rows: int) -> None:
        """Steps have at most `max_rows` rows from now on: free what larger ones held."""
        if self.graphs is not None:  # graphs of buckets that can no longer run hold memory
            self.graphs.drop_larger_than(max_rows)
        if self.model.device.type == "cuda":
            torch.cuda.empty_cache()

    # -- the step ------------------------------------------------------------------------------------

    def launch(self, groups: dict[int, Group]) -> LaunchedStep:
        """Queue one step: feed every live row one token and advance every group's search."""
        live = list(groups.values())
        sentences = [s for group in live for s in group.sentences]
        self.grow(sentences)
        with_lora = any(s.adapter_slot >= 0 for s in sentences)
        requests = self.requests
        partial = [i for i, s in enumerate(sentences) if requests[s].on_partial is not None]
        # The host reads a step's report while the next step runs, and queues the one after only once
        # it has read it: steps report into two sets of memory in turn.
        self._parity ^= 1
        report = self._search_in_graph(live[0], with_lora, bool(partial)) if len(live) == 1 else None
        if report is None:
            report = self._search_eagerly(live, with_lora, bool(partial))
        for s in sentences:
            s.cached += 1
            s.length += 1
        ready = None
        if self.model.device.type == "cuda":
            ready = torch.cuda.Event()
            ready.record()
        return LaunchedStep(sentences, [s.length for s in sentences], report, partial, ready)

    def finish(self, step: LaunchedStep) -> list[Sentence]:
        """Wait for a launched step; set its finished sentences' results and report the partial
        results of the others; returns the finished ones."""
        if step.ready is not None:
            step.ready.synchronize()
        done = step.report.done.tolist()
        finished = [i for i, s in enumerate(step.sentences) if done[i] and s.live]
        if not finished and not step.partial:
            return []
        # The step reported the finished sentences' results and, if any streams them, every one's
        # best hypothesis: one conversion of the rows needed, not of all.
        lengths = step.report.lengths.tolist()
        width = max([lengths[i] for i in finished] + [step.lengths[i] for i in step.partial])
        needed = sorted(set(finished).union(step.partial))
        table = dict(zip(needed, step.report.best[needed, :width].tolist()))  # sentence -> its (width,) row
        requests = self.requests
        for i in finished:
            requests[step.sentences[i]].result = table[i][: lengths[i]]
        wanting = [i for i in finished if requests[step.sentences[i]].alternatives]
        if wanting:
            self._read_hypotheses([step.sentences[i] for i in wanting], step.report.scores[wanting].tolist())
        for i in step.partial:
            s = step.sentences[i]
            if s.live and requests[s].result is None:
                on_partial = requests[s].on_partial
                assert on_partial is not None  # `partial` holds those with one
                on_partial(table[i][: step.lengths[i]])
        return [step.sentences[i] for i in finished]

    def _read_hypotheses(self, sentences: list[Sentence], scores: list[float]) -> None:
        """Set each finished sentence's `request.hypotheses`, given the scores its step reported:
        greedy's one hypothesis with the mean log-probability of its tokens; beam search's (and a
        constrained search's, whose finished hypotheses are scored as beam search's) best
        with its score or, asked for more, its `alternatives` best finished hypotheses and their
        scores, read from the fin_* of its first rows (the i-th best sits at its i-th row; a search
        that ended without one, as one with a negative length penalty may, gives its best running
        hypothesis with its sum of log-probabilities). Its rows are not given back yet, and a step
        launched meanwhile fed the padding row in their place, so they hold what its last step
        left. Only sentences that ask for more than one hypothesis read fin_*, a read that waits
        for the step in flight."""
        requests = [self.requests[s] for s in sentences]
        for request, score in zip(requests, scores):
            result = request.result
            assert result is not None  # set as the sentence finished
            if request.beams == 1 and not request.constraints:
                request.hypotheses = [(result, score / (len(result) - len(request.prefix)))]
            elif request.alternatives == 1:
                request.hypotheses = [(result, score)]
        state, device = self.rows, self.model.device
        beam = [(s, r) for s, r in zip(sentences, requests) if r.alternatives > 1]
        if beam:
            rows = torch.tensor([row for s, r in beam for row in s.rows[: r.alternatives]], device=device)
            width = max(r.limit for _, r in beam)
            lengths, fin_scores = state.fin_len[rows].tolist(), state.fin_score[rows].tolist()
            tokens = state.fin_hyp[rows, :width].tolist()  # (N, width)
            at = 0
            for _, r in beam:
                found = range(at, at + r.alternatives)
                r.hypotheses = [(tokens[j][: lengths[j]], fin_scores[j]) for j in found if fin_scores[j] > NEG_INF]
                at = found.stop

    def options(self, group: Group) -> DecodingOptions:
        """The group's decoding options: its sentences' search options, which its key holds alike."""
        options = self._group_options.get(group)
        if options is None:
            options = self._group_options[group] = self.requests[next(iter(group.sentences))].search_options
        return options

    def group_rows(self, group: Group) -> torch.Tensor:
        """(S, num_beams) row ids of the group, sentence by sentence: the order of its rows in a step."""
        known = self._group_rows.get(group)
        if known is not None and known[0] == group.version:
            return known[1]
        # From a flat list: with sentences of natural lengths the group changes at nearly every step.
        [flat] = to_device_many([[row for s in group.sentences for row in s.rows]], self.model.device)  # (S * B,)
        rows = flat.view(len(group.sentences), -1).long()  # (S * B,) -> (S, B)
        self._group_rows[group] = (group.version, rows)
        return rows

    def forward(
        self, rows: torch.Tensor, with_lora: bool, with_logits: bool, group: int = 1, folded: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Feed each row (N,) the token of its hypothesis at its cache length: the rows fed (N,), with
        the padding row for those of finished sentences, and logits (N, V) if asked. `group` > 1: the
        rows come in runs of that many beams of one sentence. `folded`: they are all the folded
        sentence's (`fold_slots`).

        Everything here is device work on `DecoderRows`, so a CUDA graph captures it whole.
        """
        state = self.rows
        # Padding rows (all the padding row) feed position 0 afresh each step, as do the rows of a
        # sentence the last step found done: the host learns of it one step late, and its rows must
        # not move meanwhile.
        fed = kernels.step_inputs(rows, state.tensors, state.padding_row, self.self_cache.block_size)
        lora = LoraRows(self.lora.layers, state.adapter[fed.rows]) if with_lora else None
        return fed.rows, self.model.decode_step(
            tokens=fed.tokens,
            positions=fed.positions,
            rows=fed.rows,
            self_cache=self.self_cache,
            write_slots=fed.write_slots,
            self_slots=state.kv_slots,
            self_lens=fed.self_lens,
            self_priors=fed.priors,
            cross_cache=self.cross_cache,
            cross_slots=state.cross_slots,
            cross_lens=fed.cross_lens,
            with_logits=with_logits,
            lora=lora,
            group=group,
            folded=self.folded if folded else None,
        )

    def run_rows(
        self, rows: torch.Tensor, with_lora: bool, with_logits: bool, group: int = 1
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The decoder step over `rows` (N,), through a graph where there is one; what `forward`
        returns, for these rows. `group` as in `forward`."""
        if self.graphs is None or not self.graphs.fits(rows.numel()):
            return self.forward(rows, with_lora, with_logits, group)
        if bucket_for(rows.numel()) % group:
            group = 1  # the padding would split a run

        def step(padded: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
            return self.forward(padded, with_lora, with_logits, group)

        output = self.graphs.run(rows, (with_lora, with_logits, group), step)
        fed, logits = cast("tuple[torch.Tensor, torch.Tensor | None]", output)  # `step`'s, for the padded rows
        n = rows.numel()
        return fed[:n], None if logits is None else logits[:n]

    def _search_in_graph(self, group: Group, with_lora: bool, with_best: bool) -> kernels.StepReport | None:
        """The decoder step and the group's search as one graph replay, which also stores in pinned
        host memory what the host reads of it (kernels.step_report), valid once the step's event
        has passed and until the step after next; `with_best`: the best hypotheses of all
        sentences, not only of those done. None when the step cannot be one graph (no graphs, score
        processors that need the host, or a beam count that does not divide the padded batch). A
        constrained group of at most GRAPHED_CONSTRAINED_ROWS rows is one graph too, reading its
        tables from buffers of their shape (`_graph_tables`)."""
        rows = self.group_rows(group)  # (S, B)
        beams = rows.shape[1]
        options = self.options(group)
        if self.graphs is None or not self.graphs.fits(rows.numel()) or not bans_only_eos(options):
            return None
        size = step_bucket_for(rows.numel())
        if size % beams or (group.constrained and size > GRAPHED_CONSTRAINED_ROWS):
            return None
        # The folded sentence's steps read buffers of its S: a graph per S.
        alone = len(group.sentences) == 1 and next(iter(group.sentences)) is self.folded_sentence
        folded = self.folded.slots if alone and self.folded is not None else 0
        # Two graphs per step key, each reporting into memory of its own (`_report_memory`).
        scored = self._scored(group)
        tables = self._graph_tables(group, size // beams) if group.constrained else None
        shape = None if tables is None else (beams, *tables.widths)
        key = (with_lora, options, with_best, self._parity, folded, scored, shape)
        report = self._report_memory((size, *key), size // beams)  # keyed as the graph is
        self.graphs.run(rows.reshape(-1), key, self._graph_step(key, beams, report, tables), size)
        return report.first(rows.shape[0])

    def _graph_step(self, key: tuple, beams: int, report: kernels.StepReport,
                    tables: ConstraintTables | None) -> Callable[[torch.Tensor], None]:
        """The decoder step and one group's search over padded rows, `beams` a sentence (a
        constrained greedy search has several), as `_search_in_graph`'s `key` says, reporting into
        `report`."""
        with_lora, options, with_best, _, folded, scored, _ = key

        def step(padded: torch.Tensor) -> None:
            fed, logits = self.forward(padded, with_lora, with_logits=True, group=beams, folded=bool(folded))
            assert logits is not None  # asked for
            # Padding rows form whole sentences of the padding row; their search writes only padding state.
            self._search_and_report(options, fed.view(-1, beams), logits, self.rows.max_length, None,
                                    report, with_best, scored, tables)

        return step

    def step_sizes(self, options: DecodingOptions) -> list[int]:
        """The row counts a plain group of `options` steps through as one graph (`_search_in_graph`)."""
        beams = options.num_beams
        if self.graphs is None or not bans_only_eos(options):
            return []
        sizes = {step_bucket_for(rows) for rows in range(beams, self.rows.capacity + 1, beams)}
        return sorted(size for size in sizes if size % beams == 0 and self.graphs.fits(size))

    def prepare_step(self, options: DecodingOptions, size: int, parity: int) -> None:
        """Run, then capture, the graph of a plain group of `options` at `size` rows and `parity`
        (`_search_in_graph`'s key), on padding rows alone, which write padding state only: so
        that a document's steps replay from their first. Nothing where the key was met already
        (a step of it may be in flight, reporting where this would report)."""
        assert self.graphs is not None  # `step_sizes` gives none without
        key = (False, options, False, parity, 0, False, None)  # no adapter, no partials, unfolded, unscored, plain
        if (size, *key) in self.graphs.met:
            return
        report = self._report_memory((size, *key), size // options.num_beams)
        padding = torch.full((size,), self.rows.padding_row, dtype=torch.int64, device=self.model.device)
        step = self._graph_step(key, options.num_beams, report, None)  # a plain group: a row a beam
        for _ in range(2):  # the first use runs eagerly, the second captures (`DecodeGraphs.run`)
            self.graphs.run(padding, key, step, size)

    def _search_eagerly(self, live: list[Group], with_lora: bool, with_best: bool) -> kernels.StepReport:
        """One decoder step over every group's rows, then each group's search and report: what
        `_search_in_graph` returns, for the groups' sentences in order."""
        group_rows = [self.group_rows(group) for group in live]  # (S, B) each
        beams = group_rows[0].shape[1] if len(live) == 1 else 1  # the rows' runs of one sentence each
        step_rows = torch.cat([rows.reshape(-1) for rows in group_rows])  # (N,)
        fed, logits = self.run_rows(step_rows, with_lora, with_logits=True, group=beams)  # (N,), (N, V)
        assert logits is not None  # asked for
        S = sum(rows.shape[0] for rows in group_rows)
        report = self._report_memory(("eager", bucket_for(S), self._parity), bucket_for(S))
        first_row = first_sentence = 0
        for group, rows in zip(live, group_rows):
            lengths = [s.length for s in group.sentences]
            n, count = rows.numel(), rows.shape[0]
            # A sentence sitting this step out (done at the last one) counts its length one too far.
            width = min(max(lengths) + 1, self.rows.max_length)
            self._search_and_report(self.options(group), fed[first_row : first_row + n].view(rows.shape),  # (s, B)
                                    logits[first_row : first_row + n], width, lengths,
                                    report.part(first_sentence, count), with_best, self._scored(group),
                                    self._tables(group))
            first_row, first_sentence = first_row + n, first_sentence + count
        return report.first(S)

    def _search_and_report(
        self, options: DecodingOptions, sentences: torch.Tensor, logits: torch.Tensor, width: int,
        lengths: list[int] | None, report: kernels.StepReport, with_best: bool, scored: bool = False,
        tables: ConstraintTables | None = None,
    ) -> None:
        """One group's search over its rows `sentences` (S, B) as fed and their logits (S * B, V),
        then its report into `report` (`_report_memory`'s, for the S sentences). `scored`: a
        greedy search sums its rows' log-probabilities (`_scored`); `tables`: the group's
        constraints, for a constrained search."""
        state = self.rows
        if tables is not None:
            done = constrained_step(state, sentences, logits, options, self.eos_id, width, lengths, tables)
        else:
            search = functools.partial(greedy_step, scored=True) if scored else search_step(options)
            done = search(state, sentences, logits, options, self.eos_id, width, lengths)
        kernels.step_report(done, sentences, state.tensors, report, with_best)

    def _scored(self, group: Group) -> bool:
        """Whether the group's search sums its rows' log-probabilities: greedy, where one of its
        sentences wants its score (beam search, constrained search included, keeps its scores anyway)."""
        return group.scored > 0 and not group.constrained and self.options(group).num_beams == 1

    def _tables(self, group: Group) -> ConstraintTables | None:
        """A constrained group's constraints on the device. When its sentences change, those that
        stay keep their tables (a gather on the device: sentences leave a document's group nearly
        every step) and only those that joined (at its end) are built."""
        if not group.constrained:
            return None
        sentences = list(group.sentences)
        made_for, tables = self._group_tables.get(group, ([], None))
        if tables is not None and made_for == sentences:
            return tables
        had: dict[Sentence, int] = {s: i for i, s in enumerate(made_for)}
        kept = [s for s in sentences if s in had]
        joined = sentences[len(kept):]
        if tables is not None and kept and sentences[: len(kept)] == kept:
            tables = tables.select(to_device([had[s] for s in kept], self.model.device, torch.int64))
            if joined:
                tables = ConstraintTables.joined(tables, self._build_tables(joined))
        else:
            tables = self._build_tables(sentences)
        self._group_tables[group] = (sentences, tables)
        return tables

    def _graph_tables(self, group: Group, sentences: int) -> ConstraintTables:
        """The group's tables in buffers for a graph of `sentences` (padding ones included), their
        dimensions rounded up to powers of two so that few graphs serve the groups of a document;
        refilled (a few copies on the device) when the group's tables change. Padding sentences
        keep whatever the buffers hold: their rows are the padding row's."""
        tables = self._tables(group)
        assert tables is not None  # called for constrained groups
        C, L, J, R = tables.widths  # rounded up as they are built (`table_width`)
        key = (sentences, C, L, J, R)
        if key not in self._static_tables:
            zeros = functools.partial(torch.zeros, dtype=torch.int64, device=self.model.device)
            self._static_tables[key] = (ConstraintTables(zeros(sentences, C), zeros(sentences, C, L), zeros(sentences, J),
                                                         zeros(sentences, C, L, J), zeros(sentences, C, L),
                                                         zeros(sentences, C, L), zeros(sentences, R, 2)), None)
        static, filled_from = self._static_tables[key]
        if filled_from is not tables:
            S = tables.lengths.shape[0]
            for target, source in zip(static, tables):
                target[:S].copy_(source)
            self._static_tables[key] = (static, tables)
        return static

    def _build_tables(self, sentences: list[Sentence]) -> ConstraintTables:
        checked = [c for s in sentences if (c := self.requests[s].checked_constraints) is not None]
        assert len(checked) == len(sentences)  # a constrained group's sentences all have constraints
        return ConstraintTables.build(checked, self.model.device)

    def _report_memory(self, key: tuple, sentences: int) -> kernels.StepReport:
        """Host memory (pinned on the GPU) for the report of a step of `sentences`, by `key`. Keys
        carry the step's parity, so a step never writes where the host may still be reading the
        step before."""
        if key not in self._reports:
            host = functools.partial(torch.empty, pin_memory=self.model.device.type == "cuda")
            self._reports[key] = kernels.StepReport(host(sentences, dtype=torch.bool),
                                                    host((sentences, self.rows.max_length), dtype=torch.int64),
                                                    host(sentences, dtype=torch.int32),
                                                    host(sentences, dtype=torch.float32))
        return self._reports[key]

    # -- blocks --------------------------------------------------------------------------------------

    def grow(self, sentences: list[Sentence]) -> None:
        """A new block for every row of each sentence whose rows are about to start one."""
        rows, blocks = self.take_blocks(sentences)
        if rows:
            rows_t, blocks_t = to_device_many([rows, blocks], self.model.device)
            self.rows.write_block[rows_t] = blocks_t

    def take_blocks(self, sentences: list[Sentence]) -> tuple[list[int], list[int]]:
        """`grow`'s host half: takes the blocks and returns (rows, their new blocks)."""
        rows, blocks = [], []
        for s in sentences:
            if s.cached % self.self_cache.block_size == 0:
                new = self.self_cache.take_blocks(len(s.rows))
                s.blocks += new
                rows += s.rows
                blocks += new
        return rows, blocks
