"""Which sentences decode next: plain bookkeeping over counts, no tensors and no disk.

The step runner (engine/step_runner.py) executes what the scheduler plans, and the generator
(engine/generator.py) loops: `schedule()` -> run the plan -> `update()` with the sentences the step
finished (vLLM v1's `schedule()` / `update_from_output()`). A request reaches the scheduler as its
`Ticket`, ids and counts; its tokens and options stay with the generator and the runner.

Admission: waiting sentences join while free rows and KV blocks allow, one block of headroom per
live row and two per new row. While sentences run, waiting ones of priority 1 or more (documents)
are admitted only once `admit_share` of the rows is free, and the caches' blocks could take them,
or all of them fit, since each admission costs an encoder pass, and for greedy a prefix step,
that a few sentences use poorly. Typed text (priority 0) never waits for that.

Typed text first: typed text that finds no room takes it from the youngest document sentences
(preempted, as below), and while typed text runs, a step advances its groups alone (`stepping`): the
documents' sentences sit those steps out with their rows and cache as they are, and none of theirs
joins (`typing`: typed text is admitted alone, and its steps wait for no encoder pass). So a
sentence typed while a long document decodes comes back at the latency it has alone, and the
document goes on where it was, but for the few sentences that made way.

Paced documents: typed text that comes still waits for the document's step in flight, which no
stream can interrupt. While a person types (`pacing`, which the generator sets while typed text
is expected), a step advances at most `paced_rows` of the documents' rows, their oldest
sentences, and no more of them join than that, and only once half of that is free: shorter
steps, so a shorter wait, for the document going at a fraction of its rate meanwhile. The others
sit those steps out as beside typed text.

Plain and constrained documents apart: a step whose groups mix plain and constrained search runs
each group's search eagerly (engine/step_runner.py), several times slower than a step of either
alone, which is one graph. So documents' plain sentences wait ahead of their constrained ones (the
queue is ordered by `queue_key`), and a document sentence joins running document sentences only
of its own kind: the kind that runs keeps the rows while sentences of it wait, then drains, and
the other kind follows. One held for HELD_STEPS steps in a row gets its turn: the running kind
takes no more rows until it has drained (a glossary's request beside a server's stream of plain
ones waits that long at most). Typed text is not held: it steps alone anyway.

Preemption: when the coming step would run out of blocks, the most recently admitted sentence is
preempted (the runner frees its blocks; the sentence is requeued from its start). The search is
deterministic, so a restarted sentence ends exactly as it would have.

Out of GPU memory in a step (`shrink`): every running sentence is requeued and the rows a step may
have are halved; only when a single sentence does not fit does the error reach the caller.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

if TYPE_CHECKING:
    from dragoman.engine.kv_cache import Sequence

ADMIT_SHARE = 0.25  # see "Admission" above; measured in docs/performance.md
TYPED, DOCUMENT = 0, 1  # priorities (`Request.priority`): lower runs first
# Steps a document sentence waits for its kind at most (see "Plain and constrained"): 1-2 s of a
# GPU's document steps, so that a long document changes kind a few times at most.
HELD_STEPS = 256
# Whether documents' plain and constrained sentences step apart (see "Plain and constrained"). Since
# a constrained step's search is one kernel, a mixed step's eager searches cost far less than
# when this was decided; `--kinds-together` of bench.constraints and bench.docx_book measures both.
KINDS_APART = True
# Document rows a step advances at most while a person types (see "Paced documents"); measured in
# docs/performance.md.
PACED_ROWS = 64


@dataclass(frozen=True, eq=False)  # compared by identity
class Ticket:
    """What the scheduler knows of a request (engine/generator.py's `Request`, which the generator
    keeps by `id`): counts and keys. Its tokens, options and callbacks stay with the generator and
    the step runner."""

    id: int
    beams: int  # the rows it decodes in: its beams, or its constrained search's width
    prefix: int  # tokens of its decoder start, all but the last fed at admission
    source: int  # tokens of its source, in the cross-attention cache
    limit: int  # the longest its hypotheses may grow
    priority: int  # TYPED or DOCUMENT: lower runs first
    constrained: bool  # decoded by constrained search
    scored: bool  # wants its hypotheses' scores
    group: int  # the searches that advance as one: its sentences share decoding options (`Group`)
    adapter: str | None  # its LoRA adapter; None: the base model

    @property
    def typed(self) -> bool:
        return self.priority == TYPED


def queue_key(ticket: Ticket) -> tuple[int, bool]:
    """Where a request waits: by priority, a document's plain sentences ahead of its constrained ones."""
    return ticket.priority, ticket.constrained and not ticket.typed


class Waiting:
    """The waiting requests' tickets, in the order they are admitted: by `queue_key`, and in their
    order within one. A deque for each key, so that queueing a ticket walks over no other; read as
    one sequence (indexed, iterated, its length)."""

    def __init__(self, tickets: Iterable[Ticket] = ()):
        self._queues: dict[tuple[int, bool], deque[Ticket]] = {}
        for ticket in tickets:
            self.append(ticket)

    def _queue(self, ticket: Ticket) -> deque[Ticket]:
        key = queue_key(ticket)
        if key not in self._queues:
            self._queues[key] = deque()
            self._queues = dict(sorted(self._queues.items()))
        return self._queues[key]

    def append(self, ticket: Ticket) -> None:
        """Behind the tickets of its key."""
        self._queue(ticket).append(ticket)

    def appendleft(self, ticket: Ticket) -> None:
        """Ahead of the tickets of its key (a requeued one: ahead of those queued after it)."""
        self._queue(ticket).appendleft(ticket)

    def keys(self) -> list[tuple[int, bool]]:
        """The keys that have requests waiting, in order."""
        return [key for key, queue in self._queues.items() if queue]

    def remove(self, ids: set[int]) -> None:
        for key, queue in self._queues.items():
            self._queues[key] = deque(t for t in queue if t.id not in ids)

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._queues.values())

    def __bool__(self) -> bool:
        return any(self._queues.values())

    def __iter__(self) -> Iterator[Ticket]:
        return itertools.chain.from_iterable(self._queues.values())

    def _find(self, index: int) -> tuple[deque[Ticket], int]:
        for queue in self._queues.values():
            if index < len(queue):
                return queue, index
            index -= len(queue)
        raise IndexError("no request waits there")

    def __getitem__(self, index: int) -> Ticket:
        queue, at = self._find(index)
        return queue[at]

    def __delitem__(self, index: int) -> None:
        queue, at = self._find(index)
        del queue[at]


class OutOfBlocks(RuntimeError):
    """The pool has no free block left; the scheduler admits work by free blocks to avoid this."""


@dataclass(eq=False)  # compared by identity (as a dict key too)
class Sentence:
    """One admission of a request: the scheduler's record of it, and where the runner keeps it.

    The scheduler sets who runs (`order`, `live`); the runner fills in where it runs as it admits
    and steps the sentence: its decoder rows, the self-attention blocks they write into, its
    source's cross K/V, and `cached`, the positions in the cache of each of its rows."""

    ticket: Ticket
    adapter_slot: int  # its LoRA slot, -1 for the base model
    order: int  # admission order: the youngest is preempted first
    length: int  # tokens in each of its hypotheses
    rows: list[int] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    source: Sequence | None = None
    cached: int = 0
    live: bool = True  # false once it has left (finished, preempted or stopped)


class Group:
    """Running sentences that share decoding options (and, `constrained`, a constrained search of
    one width): their searches advance as one. The options are the runner's to read."""

    def __init__(self, constrained: bool = False, typed: bool = False):
        self.constrained = constrained
        self.typed = typed
        self.sentences: dict[Sentence, None] = {}  # in admission order; removal without a walk
        self.scored = 0  # of its sentences, those that want their hypotheses' scores (`Ticket.scored`)
        self.version = 0  # counts its changes: what the runner keeps of it on the device is as of one

    def add(self, sentence: Sentence) -> None:
        self.sentences[sentence] = None
        self.version += 1
        self.scored += sentence.ticket.scored

    def remove(self, sentence: Sentence) -> None:
        del self.sentences[sentence]
        self.version += 1
        self.scored -= sentence.ticket.scored

    def hold(self, sentences: list[Sentence]) -> None:
        """Its sentences are these now (a part of a group that steps alone: `Scheduler._paced`)."""
        self.sentences = dict.fromkeys(sentences)
        self.version += 1
        self.scored = sum(s.ticket.scored for s in sentences)


@dataclass
class Plan:
    """What runs next: sentences to preempt (the runner frees what they hold first; they wait again),
    sentences to admit (the runner encodes and starts them), and whether to step."""

    admit: list[Sentence]
    preempt: list[Sentence]
    step: bool
    # Requests done without a step: their prefix is already at their max_length (None: their result
    # is their prefix), or their adapter cannot be used (why).
    finished: list[tuple[Ticket, str | None]]
    alone: bool  # the admitted sentences step with no other sentence: none ran, or only documents, which sit typed text's steps out


class Scheduler:
    def __init__(self, max_rows: int, block_size: int, self_blocks: int, cross_blocks: int):
        """`self_blocks`, `cross_blocks`: the capacity of the self- and cross-attention caches, in
        blocks of `block_size` tokens."""
        self.max_rows = max_rows  # rows admitted at once
        self.admit_share = ADMIT_SHARE  # of max_rows free before waiting documents join running sentences
        self.block_size = block_size
        self.self_blocks = self_blocks
        self.cross_blocks = cross_blocks
        self.waiting = Waiting()
        self.running: list[Sentence] = []
        self.groups: dict[int, Group] = {}  # by `Ticket.group`
        self.rows_taken = 0  # by the running sentences
        self._admissions = itertools.count()
        self._holding: bool | None = None  # the kind of the document sentences held back for theirs, if any
        self._held_steps = 0  # steps in a row in which they were
        self._turn: bool | None = None  # the kind (constrained?) whose turn it is once one waited too long
        self.pacing = False  # a person types: documents step `paced_rows` at a time (see "Paced documents")
        self.paced_rows = PACED_ROWS
        # By group number: the group, and the part of it that steps while pacing (`_paced`).
        self._paced_parts: dict[int, tuple[Group, Group]] = {}

    def start(self, tickets: list[Ticket]) -> None:
        """A run begins: these tickets wait, by `queue_key` (in their order within one), and nothing runs."""
        assert not self.running, "a run that ended early has its sentences stopped (`stop`)"
        self.waiting = Waiting(tickets)

    def add(self, ticket: Ticket) -> None:
        """Queue `ticket` behind the waiting tickets of its `queue_key` or a lower one, ahead of
        the others: typed text fed while a document waits goes first."""
        self.waiting.append(ticket)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def schedule(
        self, free_self_blocks: int, free_cross_blocks: int, acquire_adapter: Callable[[str | None], int | str | None],
        in_flight: bool = False,
    ) -> Plan:
        """Plan the next step, given the caches' free blocks. `acquire_adapter(adapter)` takes a
        reference on the slot of a ticket's adapter and returns it (-1: the base model), or None
        when none is free now, or why the adapter cannot be used, which ends that request
        (`Plan.finished`). `in_flight`: a step is still running whose report has not come back (pipelined)."""
        was_running = bool(self.running)
        was_typing = self._typed_running()
        if self._holding is not None:
            self._held_steps += 1
            if self._held_steps > HELD_STEPS and self._turn is None:
                self._turn = self._holding  # the running kind takes no more rows, drains, and the held one follows
        admitted, finished, made_way = self._admit(free_self_blocks, free_cross_blocks, acquire_adapter)
        # A new sentence feeds all but the last token of its prefix at admission, into blocks taken for all its rows.
        taken = sum(s.ticket.beams * self.blocks_for(s.ticket.prefix - 1) for s in admitted)
        freed = sum(len(s.blocks) for s in made_way)
        preempt = made_way + self._make_room(free_self_blocks + freed - taken, {s: s.ticket.prefix - 1 for s in admitted})
        admit = [s for s in admitted if s.live]
        # Sentences at their length limit are done whatever the step in flight finds: another step
        # would only keep the device busy.
        stepping = self._stepping_sentences()
        step = bool(stepping) and (not in_flight or any(s.length < s.ticket.limit for s in stepping))
        # Typed text admitted while none ran steps alone too: the documents sit its steps out.
        alone = not was_running or (not was_typing and bool(admit) and all(s.ticket.typed for s in admit))
        return Plan(admit, preempt, step, finished, alone)

    def stepping(self) -> dict[int, Group]:
        """The groups the next step advances: typed text's alone while any runs, else all, or
        while pacing the part of each that steps (`_paced`)."""
        typed = {key: group for key, group in self.groups.items() if group.typed}
        if not self.pacing:
            self._paced_parts.clear()
            return typed or self.groups
        return typed or self._paced()

    def _paced(self) -> dict[int, Group]:
        """Each document group's oldest sentences, `paced_rows` shared out between the groups (a
        sentence each at least). A group that is cut steps as a Group of its own, kept while its
        sentences stay the same, so that what the runner keeps of it lasts as long."""
        share = self.paced_rows // max(1, len(self.groups))
        parts = {}
        for key, group in self.groups.items():
            count = max(1, share // next(iter(group.sentences)).ticket.beams)  # a group's sentences share a width
            if len(group.sentences) <= count:
                parts[key] = group
                continue
            held = self._paced_parts.get(key)
            part = held[1] if held is not None and held[0] is group else Group(group.constrained, group.typed)
            oldest = list(itertools.islice(group.sentences, count))
            if list(part.sentences) != oldest:
                part.hold(oldest)
            parts[key] = part
        self._paced_parts = {key: (self.groups[key], part) for key, part in parts.items() if part is not self.groups[key]}
        return parts

    def _stepping_sentences(self) -> list[Sentence]:
        """The sentences of the groups the next step advances (`stepping`)."""
        groups = self.stepping()
        return self.running if groups is self.groups else [s for group in groups.values() for s in group.sentences]

    def _typed_running(self) -> bool:
        return any(group.typed for group in self.groups.values())

    @property
    def typing(self) -> bool:
        """Whether typed text waits or runs. Meanwhile no document sentence joins (its encoder pass
        and first step would delay typed text's steps), and the engine's loop tokenizes no more of
        a document's texts, so that typed text comes back at the latency it has alone."""
        return bool(self.waiting and self.waiting[0].typed) or self._typed_running()

    def _worth_admitting(self, free_self: int, free_cross: int) -> bool:
        """Whether waiting sentences should join the running ones: typed text always; documents
        with none running, else once `admit_share` of the rows is free or all that wait fit, and
        never while typed text runs (`typing`). Rows count as free where the caches' free blocks
        could take them too (`_room`): where the cache binds, rows free of it would let a few
        sentences in at each step, each admission an encoder pass."""
        if self.waiting[0].typed or not self.running:
            return True
        # Paced, documents join once half a paced step is free: each admission is host work that
        # typed text coming meanwhile waits for, so few of them, not one each time a sentence ends.
        if self.typing or (self.pacing and self.rows_taken > self.paced_rows // 2):
            return False
        # A live row's next block is kept for it: it may need one before those waiting are in.
        free = self._room(self.waiting[0], self.rows_taken, free_self - self.rows_taken, free_cross)
        if free >= self.admit_share * self.max_rows:
            return True
        wanted = 0
        for ticket in self.waiting:
            wanted += ticket.beams
            if wanted > free:
                return False
        return True

    def _admit(
        self, free_self: int, free_cross: int, acquire_adapter: Callable[[str | None], int | str | None]
    ) -> tuple[list[Sentence], list[tuple[Ticket, str | None]], list[Sentence]]:
        """The sentences admitted, the tickets done without a row (`Plan.finished`), and the
        document sentences that made way for typed text (`_make_way`)."""
        waiting = self.waiting
        if not waiting or not self._worth_admitting(free_self, free_cross):
            return [], [], []
        admitted: list[Sentence] = []
        finished: list[tuple[Ticket, str | None]] = []
        made_way: list[Sentence] = []
        rows = self.rows_taken
        free_self -= rows  # one block of headroom per live row
        # Requests whose adapter is not ready keep their place in the queue while those behind them
        # are admitted: at most max_rows are looked past, and a name found not ready is not asked again.
        passed = 0
        not_ready: set[str | None] = set()
        typed_only = waiting[0].typed  # typed text joins alone (`typing`)
        kinds = {group.constrained for group in self.groups.values() if not group.typed}  # the documents' running
        if self._turn is not None and not any(priority > TYPED and constrained == self._turn
                                              for priority, constrained in waiting.keys()):
            self._turn = None  # those whose turn it was have gone (withdrawn)
        held: bool | None = None  # the kind of the first document sentence held back for its turn
        while passed < min(len(waiting), self.max_rows):
            ticket = waiting[passed]
            if typed_only and not ticket.typed:
                break
            if not ticket.typed and not self._its_turn(ticket.constrained, kinds):
                held = ticket.constrained if held is None else held
                passed += 1
                continue
            if ticket.prefix >= ticket.limit:  # max_length leaves no room to generate
                del waiting[passed]
                finished.append((ticket, None))
                continue
            if ticket.adapter in not_ready:
                passed += 1
                continue
            beams = ticket.beams
            if self.pacing and not ticket.typed and rows and rows + beams > self.paced_rows:
                break  # a paced step would not take it
            cross_blocks = self.blocks_for(ticket.source)
            if admitted or self.running:
                if not self._fits(ticket, rows, free_self, free_cross):
                    if not ticket.typed or not (victims := self._make_way(ticket, rows, free_self, free_cross)):
                        break
                    made_way += victims
                    rows -= sum(s.ticket.beams for s in victims)
                    free_self += sum(len(s.blocks) + s.ticket.beams for s in victims)  # their blocks and headroom
                    free_cross += sum(self.blocks_for(s.ticket.source) for s in victims)
            elif beams > self.max_rows:
                raise OutOfBlocks(f"{beams} beams are more than the {self.max_rows} rows a step may have")
            elif cross_blocks > self.cross_blocks or beams > self.self_blocks:
                raise OutOfBlocks(f"a sentence of {ticket.source} source tokens does not fit the KV cache")
            adapter_slot = acquire_adapter(ticket.adapter)
            if isinstance(adapter_slot, str):
                del waiting[passed]
                finished.append((ticket, adapter_slot))  # its `on_done` hears why
                continue
            if adapter_slot is None:  # being read, or every slot is held by running sentences
                not_ready.add(ticket.adapter)
                passed += 1
                continue
            del waiting[passed]
            admitted.append(Sentence(ticket, adapter_slot, next(self._admissions), ticket.prefix))
            rows += beams
            free_self -= 2 * beams
            free_cross -= cross_blocks
            if not ticket.typed:
                kinds.add(ticket.constrained)
                if self._turn == ticket.constrained:
                    self._turn = None  # its turn has come
        self._holding = held
        if held is None:
            self._held_steps = 0
        for sentence in admitted:
            self._join(sentence)
        if made_way:  # they wait again behind typed text, ahead of the documents queued after them
            self.running[:] = [s for s in self.running if s.live]
            for sentence in made_way:  # youngest first: each goes ahead of the one before
                waiting.appendleft(sentence.ticket)
        return admitted, finished, made_way

    def _its_turn(self, constrained: bool, running: set[bool]) -> bool:
        """Whether a document sentence, constrained or not, may join the documents' `running`
        kinds: only its own kind's, and not while the other kind has its turn (`_turn`)."""
        return not KINDS_APART or (running <= {constrained} and self._turn in (None, constrained))

    def _room(self, like: Ticket, rows: int, free_self: int, free_cross: int) -> int:
        """The rows that could join sentences taking `rows` rows, with these free blocks, for
        sentences like `like`: free rows, two self-attention blocks a row, and each sentence's
        source in the free cross-attention blocks."""
        sentences = free_cross // max(1, self.blocks_for(like.source))
        return min(self.max_rows - rows, free_self // 2, sentences * like.beams)

    def _fits(self, ticket: Ticket, rows: int, free_self: int, free_cross: int) -> bool:
        """Whether `ticket` can join sentences that take `rows` rows, leaving these free blocks."""
        return self._room(ticket, rows, free_self, free_cross) >= ticket.beams

    def _make_way(self, ticket: Ticket, rows: int, free_self: int, free_cross: int) -> list[Sentence]:
        """Typed text that does not fit: the youngest running document sentences leave until it does
        (the caller requeues them); returns them, or none (and none leaves) if all of them would not do."""
        victims = []
        for sentence in sorted((s for s in self.running if not s.ticket.typed), key=lambda s: s.order, reverse=True):
            if self._fits(ticket, rows, free_self, free_cross):
                break
            victims.append(sentence)
            rows -= sentence.ticket.beams
            free_self += len(sentence.blocks) + sentence.ticket.beams
            free_cross += self.blocks_for(sentence.ticket.source)
        if not self._fits(ticket, rows, free_self, free_cross):
            return []
        for sentence in victims:
            self._leave(sentence)
        return victims

    def _join(self, sentence: Sentence) -> None:
        self.running.append(sentence)
        ticket = sentence.ticket
        self.rows_taken += ticket.beams
        if ticket.group not in self.groups:
            self.groups[ticket.group] = Group(ticket.constrained, ticket.typed)
        self.groups[ticket.group].add(sentence)

    def _leave(self, sentence: Sentence) -> None:
        sentence.live = False
        self.rows_taken -= sentence.ticket.beams
        key = sentence.ticket.group
        group = self.groups[key]
        group.remove(sentence)
        if not group.sentences:
            del self.groups[key]

    def _make_room(self, free_self: int, new: dict[Sentence, int]) -> list[Sentence]:
        """Preempt the youngest sentences until the coming step's new blocks fit `free_self`; `new`
        gives the cache positions the sentences admitted now will have once started. Only the
        sentences that step take blocks: beside typed text, the documents' sit its steps out, and
        none of them is preempted for blocks those steps do not take."""
        def needed() -> int:
            return sum(s.ticket.beams for s in self._stepping_sentences() if new.get(s, s.cached) % self.block_size == 0)

        preempted = []
        while self.running and needed() > free_self:
            if len(self.running) == 1:
                raise OutOfBlocks(f"the KV cache ({self.self_blocks} blocks) is too small for one sentence")
            victim = max(self.running, key=lambda s: s.order)
            self.running.remove(victim)
            self._leave(victim)
            self.waiting.appendleft(victim.ticket)
            # Admitted and preempted at once, it never starts: it gives back only its adapter slot.
            free_self += victim.ticket.beams * self.blocks_for(new[victim]) if victim in new else len(victim.blocks)
            preempted.append(victim)
        return preempted

    def update(self, finished: list[Sentence]) -> None:
        """The sentences a step reported done leave."""
        for sentence in finished:
            self._leave(sentence)
        if finished:  # one pass, not a list removal per sentence
            self.running[:] = [s for s in self.running if s.live]

    def withdraw(self, ids: set[int]) -> list[Sentence]:
        """Cancelled requests (by ticket id) leave the queue, and their running sentences leave too;
        returns those."""
        self.waiting.remove(ids)
        left = [s for s in self.running if s.ticket.id in ids]
        for sentence in left:
            self._leave(sentence)
        if left:
            self.running[:] = [s for s in self.running if s.live]
        return left

    def unadmit(self, sentences: list[Sentence]) -> None:
        """Sentences whose admission failed (out of GPU memory) wait again, at the front, as they were."""
        for sentence in reversed(sentences):
            if sentence.live:
                self._leave(sentence)
            self.waiting.appendleft(sentence.ticket)
        self.running[:] = [s for s in self.running if s.live]

    def stop(self) -> list[Sentence]:
        """A run that ends early: every running sentence leaves; returns them."""
        left = list(self.running)
        for sentence in left:
            self._leave(sentence)
        self.running.clear()
        return left

    def shrink(self) -> list[Sentence] | None:
        """Out of GPU memory mid-step: requeue every running sentence (a restart gives the same
        result) and halve the rows a step may have; returns the requeued sentences, or None when
        not even one sentence fits (nothing left to shrink)."""
        beams = [s.ticket.beams for s in self.running]
        beams += [ticket.beams for ticket in itertools.islice(self.waiting, 1)]  # one that failed to start
        if self.max_rows <= max(beams, default=1):
            return None
        requeued = sorted(self.running, key=lambda s: s.order, reverse=True)
        for sentence in requeued:
            self._leave(sentence)
            self.waiting.appendleft(sentence.ticket)
        self.running.clear()
        self.max_rows //= 2
        return requeued
