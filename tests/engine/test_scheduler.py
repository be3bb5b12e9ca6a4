"""The scheduler on its own: plans from counts of rows and blocks, no model and no device."""

import itertools
import subprocess
import sys

import pytest

from dragoman.engine.generator import Request
from dragoman.engine import scheduler as scheduler_module
from dragoman.engine.scheduler import OutOfBlocks, Scheduler, Ticket

BLOCK = 16
BASE = lambda adapter: -1  # noqa: E731 every request on the base model
_ids = itertools.count()
_groups: dict[tuple, int] = {}


def ticket(beams=1, priority=1, source=10, prefix=2, max_length=20, adapter=None, constrained=False):
    """A request's ticket, as the generator makes one: requests of one beam count, max_length,
    priority and kind share a group, as their decoding options would."""
    group = _groups.setdefault((beams, max_length, priority, constrained), len(_groups))
    return Ticket(next(_ids), beams, prefix, source, max_length, priority, constrained, False, group, adapter)


def scheduler(max_rows=8, self_blocks=1000, cross_blocks=1000):
    return Scheduler(max_rows, BLOCK, self_blocks, cross_blocks)


def queued(s, *requests):
    for r in requests:
        s.add(r)
    return list(requests)


def admitted(plan):
    return [sentence.ticket for sentence in plan.admit]


def test_the_module_imports_no_torch():
    code = "import sys, dragoman.engine.scheduler; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_admission_stops_at_the_rows_a_step_may_have():
    s = scheduler(max_rows=8)
    a, b, c = queued(s, ticket(4), ticket(4), ticket(4))
    plan = s.schedule(1000, 1000, BASE)
    assert admitted(plan) == [a, b] and list(s.waiting) == [c]
    assert plan.alone and plan.step and s.rows_taken == 8
    assert [[x.ticket for x in g.sentences] for g in s.groups.values()] == [[a, b]]
    assert admitted(s.schedule(1000, 1000, BASE)) == []  # full: c waits


def test_admission_keeps_two_blocks_per_new_row_and_one_per_running_row():
    s = scheduler(max_rows=64)
    s.admit_share = 0.0  # any room is worth an admission here
    requests = queued(s, *(ticket(4) for _ in range(4)))
    # 2 x 4 blocks per new sentence: 17 free blocks admit two (the first is always admitted).
    assert admitted(s.schedule(17, 1000, BASE)) == requests[:2]
    # Now 8 rows run, each keeping one block: 8 + 8 needed for one more.
    assert admitted(s.schedule(15, 1000, BASE)) == []
    assert admitted(s.schedule(16, 1000, BASE)) == requests[2:3]


def test_documents_wait_for_a_share_of_the_rows_that_the_caches_can_take_too():
    """Rows free of a cache that is full would let a few document sentences in at each step, each
    admission an encoder pass: they wait until the blocks for admit_share of the rows are free."""
    s = scheduler(max_rows=64)
    first = queued(s, *(ticket(4, source=40) for _ in range(4)))  # 3 source blocks each
    assert admitted(s.schedule(1000, 1000, BASE)) == first  # 16 rows run: 48 free, over a quarter
    later = queued(s, *(ticket(4, source=40) for _ in range(8)))
    # Blocks for 8 more rows (16 headroom + 16): 8 rows are an eighth of 64.
    assert admitted(s.schedule(32, 1000, BASE)) == []
    assert admitted(s.schedule(1000, 6, BASE)) == []  # the source cache: 6 blocks hold 2 such sentences, 8 rows
    # Blocks for 16 rows, a quarter: four sentences join.
    assert admitted(s.schedule(48, 1000, BASE)) == later[:4]


def test_admission_stops_at_the_source_cache():
    s = scheduler()
    a, b = queued(s, ticket(source=40), ticket(source=40))  # 3 blocks of 16 each
    assert admitted(s.schedule(1000, 5, BASE)) == [a]
    assert list(s.waiting) == [b]


def test_a_sentence_that_can_never_fit_is_an_error():
    s = scheduler(max_rows=4)
    queued(s, ticket(8))
    with pytest.raises(OutOfBlocks, match="8 beams are more than the 4 rows"):
        s.schedule(1000, 1000, BASE)
    s = scheduler(cross_blocks=2)
    queued(s, ticket(source=40))
    with pytest.raises(OutOfBlocks, match="40 source tokens does not fit"):
        s.schedule(1000, 1000, BASE)


def test_typed_text_queues_ahead_of_waiting_documents():
    s = scheduler()
    d1, d2, t1, d3, t2 = ticket(), ticket(), ticket(priority=0), ticket(), ticket(priority=0)
    queued(s, d1, d2, t1, d3, t2)
    assert list(s.waiting) == [t1, t2, d1, d2, d3]


@pytest.mark.parametrize("share, joins", [(0.0, True), (0.25, True), (0.5, False)])
def test_documents_join_running_ones_once_a_share_of_the_rows_is_free(share, joins):
    s = scheduler(max_rows=8)
    s.admit_share = share
    first = queued(s, *(ticket() for _ in range(8)))
    s.schedule(1000, 1000, BASE)
    s.update(s.running[:2])  # two of the eight rows free
    later = queued(s, *(ticket() for _ in range(4)))  # more than fit
    assert admitted(s.schedule(1000, 1000, BASE)) == (later[:2] if joins else [])
    assert all(r not in s.waiting for r in first)


def test_documents_join_at_once_when_all_that_wait_fit():
    s = scheduler(max_rows=8)
    s.admit_share = 1.0  # else: wait for the batch to drain
    queued(s, *(ticket() for _ in range(8)))
    s.schedule(1000, 1000, BASE)
    s.update(s.running[:1])
    [last] = queued(s, ticket())
    assert admitted(s.schedule(1000, 1000, BASE)) == [last]


def test_typed_text_never_waits_for_the_share():
    s = scheduler(max_rows=8)
    s.admit_share = 1.0
    queued(s, *(ticket() for _ in range(8)))
    s.schedule(1000, 1000, BASE)
    s.update(s.running[:1])
    document, typed = ticket(), ticket(priority=0)
    queued(s, document, ticket(), typed)
    assert admitted(s.schedule(1000, 1000, BASE)) == [typed]  # one row free: the typed sentence takes it


def test_typed_text_without_room_takes_it_from_the_youngest_document_sentences_and_steps_alone():
    s = scheduler(max_rows=8)
    a, b, c, d, waiting = queued(s, ticket(2), ticket(2), ticket(2), ticket(2), ticket(2))
    s.schedule(1000, 1000, BASE)
    for sentence in s.running:  # as the runner leaves them: a block for each row
        sentence.blocks = [0, 1]
    typed = ticket(4, priority=0)
    s.add(typed)
    plan = s.schedule(1000, 1000, BASE)
    assert admitted(plan) == [typed] and [p.ticket for p in plan.preempt] == [d, c]  # the youngest two
    assert list(s.waiting) == [c, d, waiting]  # ahead of the documents queued after them, as admitted
    assert [x.ticket for x in s.running] == [a, b, typed] and s.rows_taken == 8
    stepping = s.stepping()
    assert [[x.ticket for x in g.sentences] for g in stepping.values()] == [[typed]]  # the documents sit out
    s.update([x for x in s.running if x.ticket is typed])
    assert [[x.ticket for x in g.sentences] for g in s.stepping().values()] == [[a, b]]  # and go on


def test_typed_text_admitted_beside_documents_steps_alone_and_its_plan_says_so():
    """`Plan.alone` (the step runner folds such a sentence's source into the cross-attention): typed
    text admitted into an empty batch or beside documents only, which sit its steps out; not typed
    text joining typed text, nor documents joining documents."""
    s = scheduler(max_rows=16)
    s.admit_share = 0.0
    queued(s, ticket(2))
    assert s.schedule(1000, 1000, BASE).alone  # an empty batch
    queued(s, ticket(2))
    assert not s.schedule(1000, 1000, BASE).alone  # a document beside documents
    first = queued(s, ticket(4, priority=0))
    plan = s.schedule(1000, 1000, BASE)
    assert admitted(plan) == first and plan.alone  # the documents sit its steps out
    second = queued(s, ticket(4, priority=0, max_length=30))
    plan = s.schedule(1000, 1000, BASE)
    assert admitted(plan) == second and not plan.alone  # it steps beside the first


def test_no_document_sentence_joins_while_typed_text_waits_or_runs():
    """Typed text is admitted alone, and documents join only once it has finished, though rows are
    free: their encoder passes would delay its steps."""
    s = scheduler(max_rows=16)
    s.admit_share = 0.0
    running = queued(s, ticket(4))
    s.schedule(1000, 1000, BASE)
    typed, later = ticket(4, priority=0), ticket(4)
    queued(s, later, typed)
    assert s.typing
    assert admitted(s.schedule(1000, 1000, BASE)) == [typed]  # `later` fits, and waits
    assert s.typing and not admitted(s.schedule(1000, 1000, BASE))
    s.update([x for x in s.running if x.ticket is typed])
    assert not s.typing
    assert admitted(s.schedule(1000, 1000, BASE)) == [later]
    assert [x.ticket for x in s.running] == [running[0], later]


def test_typed_text_takes_no_room_when_all_the_documents_would_not_make_it():
    s = scheduler(max_rows=8, cross_blocks=4)
    a, b = queued(s, ticket(4, source=16), ticket(4, source=16))  # a cross block each
    s.schedule(1000, 4, BASE)
    typed = ticket(4, priority=0, source=100)  # 7 cross blocks: more than the cache has free with a and b gone
    s.add(typed)
    plan = s.schedule(1000, 2, BASE)
    assert not plan.admit and not plan.preempt and [x.ticket for x in s.running] == [a, b]
    assert list(s.waiting) == [typed]


def test_the_youngest_sentence_is_preempted_when_the_step_needs_more_blocks():
    s = scheduler(max_rows=64)
    a, b, c = queued(s, ticket(4), ticket(4), ticket(4))
    plan = s.schedule(1000, 1000, BASE)
    for sentence in plan.admit:  # as the runner leaves them: at a block's end, each row's block taken
        sentence.cached = BLOCK
        sentence.blocks = list(range(4))
    # The coming step takes 4 blocks a sentence: 12 wanted, 6 free and the 4 that c gives back.
    plan = s.schedule(6, 1000, BASE)
    assert [p.ticket for p in plan.preempt] == [c] and list(s.waiting) == [c]
    assert [x.ticket for x in s.running] == [a, b] and plan.step
    plan = s.schedule(3, 1000, BASE)  # 3 free and b's 4 leave room for a
    assert [p.ticket for p in plan.preempt] == [b] and list(s.waiting) == [b, c]  # b ahead of c, as admitted
    assert [x.ticket for x in s.running] == [a] and s.rows_taken == 4


def test_documents_sitting_out_typed_texts_steps_take_no_blocks_and_are_not_preempted_for_them():
    s = scheduler(max_rows=16)
    a, b = queued(s, ticket(4), ticket(4))
    for sentence in s.schedule(1000, 1000, BASE).admit:  # both at a block's end: their next step takes 4 each
        sentence.cached = BLOCK
        sentence.blocks = list(range(4))
    typed = queued(s, ticket(4, priority=0))
    [sentence] = s.schedule(1000, 1000, BASE).admit
    assert [sentence.ticket] == typed
    sentence.cached, sentence.blocks = 1, list(range(4))  # mid-block: its steps take none for a while
    plan = s.schedule(2, 1000, BASE)  # too few for the documents' next step, enough for the typed text's
    assert plan.step and not plan.preempt and [x.ticket for x in s.running] == [a, b, *typed]
    s.update([sentence])  # typed text done, the documents step again: now they need their blocks
    plan = s.schedule(6, 1000, BASE)
    assert [p.ticket for p in plan.preempt] == [b] and [x.ticket for x in s.running] == [a]


def stepping_tickets(s):
    return [[x.ticket for x in group.sentences] for group in s.stepping().values()]


def test_while_a_person_types_documents_step_their_oldest_paced_rows():
    s = scheduler(max_rows=64)
    s.admit_share = 0.0
    a, b, c, d = queued(s, *(ticket(4) for _ in range(4)))
    s.schedule(1000, 1000, BASE)
    s.pacing, s.paced_rows = True, 8
    assert stepping_tickets(s) == [[a, b]]
    part = next(iter(s.stepping().values()))
    assert stepping_tickets(s) == [[a, b]] and next(iter(s.stepping().values())) is part  # kept while it holds
    s.update([x for x in s.running if x.ticket is a])
    assert stepping_tickets(s) == [[b, c]] and next(iter(s.stepping().values())) is part  # the same, changed
    typed = queued(s, ticket(4, priority=0))
    s.schedule(1000, 1000, BASE)
    assert stepping_tickets(s) == [typed]  # typed text steps alone, as ever
    s.update([x for x in s.running if x.ticket.typed])
    assert stepping_tickets(s) == [[b, c]]
    s.pacing = False
    assert stepping_tickets(s) == [[b, c, d]]  # once no one types, all of them again


def test_paced_rows_are_shared_between_document_groups_a_sentence_each_at_least():
    s = scheduler(max_rows=64)
    s.admit_share = 0.0
    first = queued(s, *(ticket(4) for _ in range(3)))
    second = queued(s, *(ticket(2, max_length=30) for _ in range(3)))
    s.schedule(1000, 1000, BASE)
    s.pacing, s.paced_rows = True, 8
    assert stepping_tickets(s) == [first[:1], second[:2]]  # 4 rows each
    s.paced_rows = 2
    assert stepping_tickets(s) == [first[:1], second[:1]]


def test_while_a_person_types_documents_join_as_far_as_a_paced_step_takes_them_once_half_of_it_is_free():
    s = scheduler(max_rows=64)
    s.admit_share = 0.0
    s.pacing, s.paced_rows = True, 8
    a, b, c, d, e = queued(s, *(ticket(2) for _ in range(5)))
    assert admitted(s.schedule(1000, 1000, BASE)) == [a, b, c, d]
    assert admitted(s.schedule(1000, 1000, BASE)) == []  # e would not step
    s.update([x for x in s.running if x.ticket is a])
    assert admitted(s.schedule(1000, 1000, BASE)) == []  # 2 rows free: not yet worth an admission
    s.update([x for x in s.running if x.ticket is b])
    assert admitted(s.schedule(1000, 1000, BASE)) == [e]  # half of a paced step free
    typed = queued(s, ticket(8, priority=0))
    assert admitted(s.schedule(1000, 1000, BASE)) == typed  # typed text is not paced


def test_paced_documents_take_blocks_only_for_the_sentences_that_step():
    s = scheduler(max_rows=64)
    s.admit_share = 0.0
    a, b = queued(s, ticket(4), ticket(4))
    for sentence in s.schedule(1000, 1000, BASE).admit:  # both at a block's end: their next step takes 4 each
        sentence.cached = BLOCK
        sentence.blocks = list(range(4))
    s.pacing, s.paced_rows = True, 4
    plan = s.schedule(4, 1000, BASE)  # enough for a's step alone
    assert plan.step and not plan.preempt and stepping_tickets(s) == [[a]]
    s.pacing = False
    assert [p.ticket for p in s.schedule(4, 1000, BASE).preempt] == [b]


def test_a_sentence_admitted_where_the_step_has_no_room_is_not_started():
    s = scheduler(max_rows=64)
    a, b = queued(s, ticket(4), ticket(4))
    plan = s.schedule(1000, 1000, BASE)
    for sentence in plan.admit:  # both at a block's end
        sentence.cached = BLOCK
        sentence.blocks = list(range(4))
    c = ticket(1, prefix=2 * BLOCK + 1, max_length=40)  # fills two blocks at admission, needs a third at once
    queued(s, c)
    # Admitted (10 - 8 >= 2 blocks), it would leave 8 for the 9 the step needs: it is not started.
    plan = s.schedule(10, 1000, BASE)
    assert admitted(plan) == [] and [p.ticket for p in plan.preempt] == [c] and list(s.waiting) == [c]
    assert [x.ticket for x in s.running] == [a, b] and s.rows_taken == 8
    plan = s.schedule(11, 1000, BASE)
    assert admitted(plan) == [c] and plan.preempt == []
    s.update(plan.admit)
    # One filling three blocks at admission would leave a and b 7 of 10: left out, it leaves them 10.
    d = ticket(1, prefix=3 * BLOCK + 1, max_length=60)
    queued(s, d)
    plan = s.schedule(10, 1000, BASE)
    assert [p.ticket for p in plan.preempt] == [d] and [x.ticket for x in s.running] == [a, b]


def test_one_sentence_too_big_for_the_cache_is_an_error():
    s = scheduler(self_blocks=4)
    queued(s, ticket(4))
    [sentence] = s.schedule(1000, 1000, BASE).admit
    sentence.cached = BLOCK
    with pytest.raises(OutOfBlocks, match="too small for one sentence"):
        s.schedule(3, 1000, BASE)


def test_out_of_memory_requeues_every_sentence_and_halves_the_rows():
    s = scheduler(max_rows=16)
    requests = queued(s, *(ticket(4) for _ in range(5)))
    s.schedule(1000, 1000, BASE)
    requeued = s.shrink()
    assert [x.ticket for x in requeued] == requests[3::-1]  # youngest first
    assert list(s.waiting) == requests and s.max_rows == 8 and not s.running and not s.groups and s.rows_taken == 0
    assert admitted(s.schedule(1000, 1000, BASE)) == requests[:2]
    assert s.shrink() is not None and s.max_rows == 4
    assert s.shrink() is None and s.max_rows == 4  # a sentence of 4 beams needs them all


def test_finished_sentences_leave_and_free_their_rows():
    s = scheduler(max_rows=8)
    greedy, beam = ticket(1), ticket(4)
    queued(s, greedy, beam)
    plan = s.schedule(1000, 1000, BASE)
    assert len(s.groups) == 2
    s.update([plan.admit[0]])
    assert [x.ticket for x in s.running] == [beam] and s.rows_taken == 4 and len(s.groups) == 1
    assert not plan.admit[0].live
    s.update([plan.admit[1]])
    assert not s.running and not s.groups and s.rows_taken == 0
    assert not s.schedule(1000, 1000, BASE).step


def test_a_prefix_at_its_max_length_is_done_without_a_row():
    s = scheduler()
    done, other = queued(s, ticket(prefix=2, max_length=2), ticket())
    plan = s.schedule(1000, 1000, BASE)
    assert plan.finished == [(done, None)] and admitted(plan) == [other]


def test_adapters_wait_for_a_slot_and_unusable_ones_end_their_request():
    s = scheduler()
    broken, waits, later = queued(s, ticket(adapter="broken"), ticket(adapter="busy"), ticket())

    def acquire(adapter):
        if adapter == "broken":
            return "broken: no adapter_config.json"
        return None if adapter == "busy" else -1

    plan = s.schedule(1000, 1000, acquire)
    assert plan.finished == [(broken, "broken: no adapter_config.json")] and admitted(plan) == [later]  # admitted past it
    assert list(s.waiting) == [waits]  # keeping its place until its adapter is read or a slot is free
    plan = s.schedule(1000, 1000, lambda adapter: 2 if adapter else -1)
    assert admitted(plan) == [waits] and [x.adapter_slot for x in plan.admit] == [2]


def test_requests_on_an_adapter_not_ready_are_looked_past_at_most_max_rows_deep():
    s = scheduler(max_rows=3)
    waiting = queued(s, *[ticket(adapter="reading") for _ in range(3)], ticket())
    asked = []

    def acquire(adapter):
        asked.append(adapter)
        return None if adapter == "reading" else -1

    plan = s.schedule(1000, 1000, acquire)
    assert asked == ["reading"]  # a name found not ready is not asked again
    assert admitted(plan) == [] and list(s.waiting) == waiting  # the base request lies past max_rows


def test_no_step_is_planned_while_one_in_flight_ends_every_sentence():
    s = scheduler()
    queued(s, ticket(max_length=5), ticket(max_length=8))
    s.schedule(1000, 1000, BASE)
    for sentence, length in zip(s.running, (5, 7)):
        sentence.length = length
    assert s.schedule(1000, 1000, BASE, in_flight=True).step  # the second has a token to go
    s.running[1].length = 8
    assert not s.schedule(1000, 1000, BASE, in_flight=True).step
    assert s.schedule(1000, 1000, BASE, in_flight=False).step


def test_the_schedulers_records_hold_ids_and_counts_while_the_runner_steps_them(translator, monkeypatch):
    """The scheduler plans with ids and counts: while plain and constrained sentences decode, every
    field of a waiting ticket, a running sentence and a group is a number, a flag, a name, a list of
    block or row ids, a ticket, or the sentences of a group: no request, no options, no tokens, no
    tensor (the generator and the step runner keep those)."""
    from dragoman.engine.decoding import DecodingOptions
    from dragoman.engine.kv_cache import Sequence
    from dragoman.engine.scheduler import Sentence

    generator, tok = translator.generator, translator.tokenizer
    options = DecodingOptions(num_beams=2, max_length=12)
    requests = [Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"), options, 1,
                        constraints=[tok.encode_target_start("le monde")] if i % 2 else None)
                for i, text in enumerate(["Hello world.", "The red house.", "A small cat.", "Good morning.", "Yes."])]
    monkeypatch.setattr(generator, "max_rows", 8)  # some wait while the others run
    seen = []

    def counts_and_ids(value) -> bool:
        if isinstance(value, (list, tuple)):
            return all(isinstance(v, int) for v in value)
        if isinstance(value, dict):
            return all(isinstance(v, Sentence) for v in value)
        return value is None or isinstance(value, (int, str, Ticket, Sequence))

    def look(idle: bool) -> list | None:  # the feed: asked at every step
        scheduler = generator.scheduler
        for record in [*scheduler.waiting, *scheduler.running, *scheduler.groups.values()]:
            seen.append(type(record).__name__)
            assert all(counts_and_ids(v) for v in vars(record).values()), vars(record)
        return None if idle else []

    generator.run(requests, feed=look)
    assert {"Ticket", "Sentence", "Group"} <= set(seen) and all(r.result for r in requests)


def constrained(**kwargs):
    """A document request whose search is constrained."""
    return ticket(constrained=True, **kwargs)


def finish(s, *requests):
    s.update([sentence for sentence in s.running if sentence.ticket in requests])


def kinds_running(s):
    return {group.constrained for group in s.groups.values()}


def test_a_documents_plain_sentences_wait_ahead_of_its_constrained_ones_and_never_step_with_them():
    s = scheduler(max_rows=8)
    c1, p1, c2, p2 = queued(s, constrained(beams=2), ticket(2), constrained(beams=2), ticket(2))
    assert list(s.waiting) == [p1, p2, c1, c2]  # plain first, each kind in its order
    assert admitted(s.schedule(1000, 1000, BASE)) == [p1, p2]  # rows for all, but not beside them
    p3 = queued(s, ticket(2))[0]
    finish(s, p1)
    assert admitted(s.schedule(1000, 1000, BASE)) == [p3] and kinds_running(s) == {False}
    finish(s, p2, p3)  # the plain ones have drained: the constrained ones' turn
    assert admitted(s.schedule(1000, 1000, BASE)) == [c1, c2] and kinds_running(s) == {True}
    p4 = queued(s, ticket(2))[0]
    assert list(s.waiting) == [p4] and admitted(s.schedule(1000, 1000, BASE)) == []  # nor plain beside constrained
    finish(s, c1, c2)
    assert admitted(s.schedule(1000, 1000, BASE)) == [p4]


def test_with_kinds_together_a_documents_kinds_share_steps(monkeypatch):
    """scheduler.KINDS_APART off (bench.constraints --kinds-together): the queue's order stays, but a
    constrained sentence joins plain ones where rows are free."""
    monkeypatch.setattr("dragoman.engine.scheduler.KINDS_APART", False)
    s = scheduler(max_rows=8)
    c1, p1, p2 = queued(s, constrained(beams=2), ticket(2), ticket(2))
    assert admitted(s.schedule(1000, 1000, BASE)) == [p1, p2, c1] and kinds_running(s) == {False, True}


def test_typed_text_steps_beside_either_kind():
    s = scheduler(max_rows=8)
    queued(s, constrained(beams=2))
    s.schedule(1000, 1000, BASE)
    typed = queued(s, ticket(2, priority=0))[0]
    assert admitted(s.schedule(1000, 1000, BASE)) == [typed]


def test_a_kind_held_too_long_gets_its_turn_once_the_running_kind_drains(monkeypatch):
    monkeypatch.setattr("dragoman.engine.scheduler.HELD_STEPS", 2)
    s = scheduler(max_rows=8)
    running = queued(s, ticket(2))
    s.schedule(1000, 1000, BASE)
    held = queued(s, constrained(beams=2))[0]
    for _ in range(3):  # plain sentences keep coming: each is admitted as one finishes, the constrained one passed over
        more = queued(s, ticket(2))[0]
        assert admitted(s.schedule(1000, 1000, BASE)) == [more]
        finish(s, running[0])
        running = [more]
    late = queued(s, ticket(2))[0]
    assert admitted(s.schedule(1000, 1000, BASE)) == []  # its turn: no more plain rows
    finish(s, running[0])
    assert admitted(s.schedule(1000, 1000, BASE)) == [held]
    finish(s, held)
    assert admitted(s.schedule(1000, 1000, BASE)) == [late]


def test_a_turn_ends_when_those_it_was_for_are_withdrawn(monkeypatch):
    monkeypatch.setattr("dragoman.engine.scheduler.HELD_STEPS", 0)
    s = scheduler(max_rows=8)
    queued(s, ticket(2))
    s.schedule(1000, 1000, BASE)
    held = queued(s, constrained(beams=2))[0]
    plain = queued(s, ticket(2))[0]
    assert admitted(s.schedule(1000, 1000, BASE)) == [plain]  # passed over once: its turn from now on
    s.withdraw({held.id})
    late = queued(s, ticket(2))[0]
    assert admitted(s.schedule(1000, 1000, BASE)) == [late]


def test_queueing_a_request_walks_over_no_other(monkeypatch):
    """A document's plain sentences are queued ahead of thousands of its constrained ones waiting,
    each with one look at its own key (the engine's thread queues every sentence of a document)."""
    s = scheduler()
    held = [constrained() for _ in range(2000)]
    plain = [ticket() for _ in range(2000)]
    looks = []
    real = scheduler_module.queue_key
    monkeypatch.setattr(scheduler_module, "queue_key", lambda r: looks.append(r) or real(r))
    queued(s, *held, *plain)
    assert len(looks) == len(held) + len(plain)
    assert list(s.waiting) == plain + held and len(s.waiting) == 4000
    assert s.waiting[1999] is plain[-1] and s.waiting[2000] is held[0]
    del s.waiting[2000]
    s.waiting.appendleft(held[0])  # requeued: ahead of its own kind, behind the plain ones
    s.waiting.remove({plain[0].id, held[1].id})
    assert list(s.waiting) == plain[1:] + [held[0]] + held[2:]
