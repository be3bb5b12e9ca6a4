"""engine/translator.py's submit and loop: requests submitted from any thread join the engine's
one loop; their handles stream, give results, can be waited on and cancelled; typed text goes first."""

import threading
import time
from typing import Callable

import pytest

from dragoman.engine import DOCUMENT, TYPED, OptionsError, Translation, TranslationRequest

def texts(found):
    """The texts of Translations: token-identical whatever decodes beside them (a score's last bits may not be)."""
    return [None if t is None else t.text for t in found]


TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Machine translation runs on the graphics card.",
    "A short sentence.",
    "Where is the railway station?",
    "The weather is nice today, isn't it?",
    "Please close the window before you leave.",
    "Numbers like 42 and 1999 appear here.",
    "She sells sea shells by the sea shore.",
]


def test_handles_from_several_threads_at_once_get_what_one_translate_call_gives(translator):
    options = translator.default_options(num_beams=4, max_length=30)
    expected = translator.translate_full(TEXTS, "eng_Latn", "fra_Latn", options)
    handles: dict[int, object] = {}
    go = threading.Barrier(4)

    def submit(part: int) -> None:
        go.wait()  # all four at once, while the others' sentences decode
        handles[part] = translator.submit(TranslationRequest(TEXTS[part::4], "eng_Latn", "fra_Latn", options,
                                                             priority=part % 2))

    threads = [threading.Thread(target=submit, args=(part,)) for part in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for part, handle in handles.items():
        assert texts(handle.result(timeout=120)) == texts(expected[part::4])
    generator = translator.generator
    assert generator.num_free_blocks() == generator.num_total_blocks()


def test_a_handle_streams_hypotheses_then_the_translation(translator):
    options = translator.default_options(num_beams=4, min_length=12, max_length=20)
    handle = translator.submit(TranslationRequest([TEXTS[0]], "eng_Latn", "ita_Latn", options, priority=TYPED,
                                                  partials=True))
    news = list(handle.stream())
    hypotheses = [text for _, text in news if isinstance(text, str)]
    assert len(hypotheses) >= 10  # one per decoding step
    assert isinstance(news[-1][1], Translation) and all(i == 0 for i, _ in news)
    assert [news[-1][1]] == handle.result() == translator.translate_full([TEXTS[0]], "eng_Latn", "ita_Latn", options)
    heard = []
    handle.subscribe(on_translation=lambda i, translation: heard.append((i, translation)))  # after it is over
    assert heard == [(0, news[-1][1])]


def test_a_cancelled_handle_stops_and_gives_back_what_it_held(make_translator):
    small = make_translator(max_rows=8)
    options = small.default_options(num_beams=4, min_length=25, max_length=30)
    first = threading.Event()
    handle = small.submit(TranslationRequest(TEXTS * 3, "eng_Latn", "fra_Latn", options))
    handle.subscribe(on_translation=lambda i, translation: first.set())
    assert first.wait(timeout=120)
    handle.cancel()
    assert handle.wait(timeout=1) and handle.cancelled
    found = handle.result()
    assert any(t is not None for t in found) and None in found
    # the engine goes on: the next request runs, and nothing of the cancelled one is left behind
    assert small.translate(TEXTS[:1], "eng_Latn", "fra_Latn", options)[0]
    generator = small.generator
    assert generator.num_free_blocks() == generator.num_total_blocks()
    assert generator.rows.num_free_rows() == generator.rows.capacity
    small.teardown()


def test_typed_text_submitted_while_a_document_runs_finishes_first_and_both_are_right(make_translator):
    small = make_translator(max_rows=8)  # two sentences of 4 beams at once: the document takes 12 turns
    options = small.default_options(num_beams=4, max_length=30)
    document_texts = TEXTS * 3
    alone = small.translate_full(document_texts, "eng_Latn", "fra_Latn", options)
    typed_alone = small.translate_full(["Good morning, my friend."], "eng_Latn", "fra_Latn", options)
    started = threading.Event()
    document = small.submit(TranslationRequest(document_texts, "eng_Latn", "fra_Latn", options, priority=DOCUMENT))
    document.subscribe(on_translation=lambda i, translation: started.set())
    assert started.wait(timeout=120)
    typed = small.submit(TranslationRequest(["Good morning, my friend."], "eng_Latn", "fra_Latn", options,
                                            priority=TYPED))
    assert texts(typed.result(timeout=120)) == texts(typed_alone)
    assert not document.done()  # the document still decodes: typed text did not wait for it
    assert texts(document.result(timeout=120)) == texts(alone)
    small.teardown()


def test_while_typed_text_runs_no_document_sentence_joins_is_tokenized_or_reported(make_translator, monkeypatch):
    """The document's admissions (encoder passes), the loop's tokenizing of its texts (a document
    submitted with the typed text included) and the reports of its finished sentences wait while
    typed text waits or runs, so that typed text's steps wait for none of them. Typed text is
    submitted from the engine's own thread at chosen steps of the document (its partial
    hypotheses), so that the test does not depend on timing."""
    from dragoman.engine.translator import Submission

    small = make_translator(max_rows=64)  # sixteen sentences of 4 beams at once
    options = small.default_options(num_beams=4, max_length=30)
    runner = small.generator.runner
    while_typing = []  # what was done for the document while typed text waited or ran
    typed_pending = threading.Event()  # from its submission to its translation
    admit, take, done = runner.admit, Submission.take, Submission._done

    def watched_admit(sentences, requests, *args):
        if typed_pending.is_set():
            while_typing.append(("admitted", [r.priority for r in requests]))
        return admit(sentences, requests, *args)

    def watched_take(submission, count, *until):
        taken = take(submission, count, *until)
        if typed_pending.is_set() and taken and submission.priority == DOCUMENT:
            while_typing.append(("tokenized", len(taken)))
        return taken

    def watched_done(submission, i, piece, request):
        if typed_pending.is_set() and submission.priority == DOCUMENT:
            while_typing.append(("reported", i))
        return done(submission, i, piece, request)

    monkeypatch.setattr(runner, "admit", watched_admit)
    monkeypatch.setattr(Submission, "take", watched_take)
    monkeypatch.setattr(Submission, "_done", watched_done)
    submitted: list = []  # the typed sentence and a second document, submitted together at a step of the first
    steps = 0

    def on_partial(i, text):
        nonlocal steps
        steps += i == 0
        if i == 0 and steps == 2:
            submitted.append(small.submit(TranslationRequest(TEXTS * 25, "eng_Latn", "fra_Latn", options)))
            typed_pending.set()
            submitted.append(small.submit(TranslationRequest(["Good morning, my friend."], "eng_Latn", "fra_Latn",
                                                             options, priority=TYPED)))
            submitted[-1].subscribe(on_translation=lambda i, translation: typed_pending.clear())

    first = small.submit(TranslationRequest(TEXTS[:6], "eng_Latn", "fra_Latn", options, partials=True))  # 24 of 64 rows
    first.subscribe(on_partial=on_partial)
    first.result(timeout=300)
    second, typed = submitted
    assert texts(typed.result(timeout=300)) == texts(small.translate_full(["Good morning, my friend."], "eng_Latn",
                                                                          "fra_Latn", options))
    assert texts(second.result(timeout=300)) == texts(small.translate_full(TEXTS * 25, "eng_Latn", "fra_Latn", options))
    assert while_typing == [("admitted", [TYPED])]
    small.teardown()


def test_typed_text_that_comes_while_a_documents_wave_is_tokenized_waits_for_a_few_of_its_texts_not_all(
        make_translator, monkeypatch):
    """The loop tokenizes a new document's first wave of texts at once (hundreds on a GPU): typed
    text that comes meanwhile is admitted after the text being tokenized, and the rest of the wave
    follows it. The loop's tokenizing of the document waits at its 8th text until the typed text is
    submitted."""
    small = make_translator(max_rows=512)  # a wave of 128 sentences of 4 beams
    options = small.default_options(num_beams=4, max_length=20)
    wave = small.generator.sentences_at_once(4)
    document = [f"{text} ({n})" for n in range(3) for text in TEXTS * 20][: wave + 40]
    sources = small._sources
    tokenized: list[str] = []  # the document's texts, as the loop tokenizes them
    typed_admitted_after: list[int] = []  # the document's texts tokenized by then
    typing_now, typed_submitted = threading.Event(), threading.Event()

    def slow_sources(text, src_lang):
        if text in document:
            tokenized.append(text)
            if len(tokenized) == 8:
                typing_now.set()
                assert typed_submitted.wait(timeout=60)
        return sources(text, src_lang)

    runner = small.generator.runner
    admit = runner.admit

    def admitting(sentences, requests, alone, group):
        if group.typed:
            typed_admitted_after.append(len(tokenized))
        return admit(sentences, requests, alone, group)

    monkeypatch.setattr(small, "_sources", slow_sources)
    monkeypatch.setattr(runner, "admit", admitting)
    handle = small.submit(TranslationRequest(document, "eng_Latn", "fra_Latn", options))
    assert typing_now.wait(timeout=60)
    typed = small.submit(TranslationRequest(["Good morning, my friend."], "eng_Latn", "fra_Latn", options,
                                            priority=TYPED))
    typed_submitted.set()
    assert texts(typed.result(timeout=300)) == texts(small.translate_full(["Good morning, my friend."], "eng_Latn",
                                                                          "fra_Latn", options))
    assert texts(handle.result(timeout=300)) == texts(small.translate_full(document, "eng_Latn", "fra_Latn", options))
    assert typed_admitted_after and typed_admitted_after[0] == 8 < wave
    small.teardown()


def test_a_document_submitted_while_typed_text_decodes_compiles_its_terms_after_it(make_translator, monkeypatch):
    """Submitting a document compiles its terms on the caller's thread, which holds the interpreter
    that the engine's thread needs at every step of typed text: while typed text waits or decodes,
    the compile pauses after every FEED_TEXTS texts. Typed text's steps wait for the compile to
    begin, then take 3 ms each, so that the document comes while it decodes."""
    from dragoman.engine.translator import FEED_TEXTS

    small = make_translator()
    options = small.default_options(num_beams=2, max_length=40)
    runner = small.generator.runner
    launch = runner.launch

    compiling = threading.Event()

    def slow_typed_steps(groups):
        if any(group.typed for group in groups.values()) and decoding.is_set():
            assert compiling.wait(timeout=60)
            time.sleep(0.003)
        return launch(groups)

    decoding = threading.Event()  # the typed text's first partial hypothesis came
    monkeypatch.setattr(runner, "launch", slow_typed_steps)
    document = [f"{text} ({n})" for n in range(4) for text in TEXTS * 4][:96]
    terms = [["chat"]] * len(document)
    sources = small._sources
    compiled_while_typing: list[bool] = []  # at each of the document's texts the submission's compile checked

    def watched_sources(text, src_lang):
        if threading.current_thread().name == "document submitter":
            compiled_while_typing.append(small.loop.typing)
            compiling.set()
        return sources(text, src_lang)

    monkeypatch.setattr(small, "_sources", watched_sources)
    typed = small.submit(TranslationRequest(["Good morning, my friend."], "eng_Latn", "fra_Latn", options,
                                            priority=TYPED, partials=True))
    typed.subscribe(on_partial=lambda i, text: decoding.set())
    assert decoding.wait(timeout=60)
    submitted: list = []
    submitter = threading.Thread(name="document submitter", target=lambda: submitted.append(
        small.submit(TranslationRequest(document, "eng_Latn", "fra_Latn", options, terms=terms))))
    submitter.start()
    typed.result(timeout=300)
    submitter.join(timeout=300)
    assert len(compiled_while_typing) == len(document)
    assert 1 <= sum(compiled_while_typing) <= FEED_TEXTS  # its first texts, before the compile first looked
    assert all("chat" in translation.text for translation in submitted[0].result(timeout=300))
    small.teardown()


@pytest.mark.parametrize("pipelined", [False, True], ids=["steps finished at once", "pipelined as on the GPU"])
def test_typed_text_that_comes_as_a_step_is_read_back_runs_in_the_next_step(make_translator, monkeypatch, pipelined):
    """Typed text submitted while the host reads a document step's report (from the engine's own
    thread, in a partial hypothesis's callback, so that the test does not depend on timing) is
    admitted before the document's next step is launched: pipelined, that step would otherwise
    go first, and the typed sentence would wait for it on the device."""
    small = make_translator(max_rows=16)
    monkeypatch.setattr(small.generator, "pipelined", pipelined)
    options = small.default_options(num_beams=4, max_length=30)
    runner = small.generator.runner
    events = []  # ("launch", priorities of the step's sentences), ("admit", priorities), ("typed",)
    launch, admit = runner.launch, runner.admit
    monkeypatch.setattr(runner, "launch", lambda groups: events.append(
        ("launch", {s.ticket.priority for g in groups.values() for s in g.sentences})) or launch(groups))
    monkeypatch.setattr(runner, "admit", lambda sentences, *args: events.append(
        ("admit", [s.ticket.priority for s in sentences])) or admit(sentences, *args))
    submitted = []
    steps = 0

    def on_partial(i, text):
        nonlocal steps
        steps += i == 0
        if i == 0 and steps == 3:
            events.append(("typed",))
            submitted.append(small.submit(TranslationRequest(["Good morning, my friend."], "eng_Latn", "fra_Latn",
                                                             options, priority=TYPED)))

    document = small.submit(TranslationRequest(TEXTS[:3], "eng_Latn", "fra_Latn", options, partials=True))
    document.subscribe(on_partial=on_partial)
    assert texts(document.result(timeout=300)) == texts(small.translate_full(TEXTS[:3], "eng_Latn", "fra_Latn",
                                                                             options))
    [typed] = submitted
    assert texts(typed.result(timeout=300)) == texts(small.translate_full(["Good morning, my friend."], "eng_Latn",
                                                                          "fra_Latn", options))
    after = events[events.index(("typed",)) + 1:]
    assert after[0] == ("admit", [TYPED]), after[:3]  # no document step launched in between
    assert after[1] == ("launch", {TYPED})  # and the typed sentence's first step is its own
    small.teardown()


@pytest.mark.parametrize("beside", [False, True], ids=["alone", "beside a document"])
def test_typed_texts_translation_is_reported_as_soon_as_the_step_that_finished_it_is_read(make_translator, monkeypatch,
                                                                                          beside):
    """Pipelined, the host reads a step while the device runs the next. Typed text's translation
    is reported as soon as the step that finished it is read, not after the host has planned and
    launched the step after that (beside a document: its sentences, and those that waited for the
    typed text joining them, an encoder pass). So no step is launched between the typed
    sentence's last and its translation."""
    small = make_translator(max_rows=16)
    monkeypatch.setattr(small.generator, "pipelined", True)
    options = small.default_options(num_beams=4, max_length=30)
    runner = small.generator.runner
    launch = runner.launch
    events: list[tuple] = []  # ("launch", whether typed text steps), ("typed done",)
    monkeypatch.setattr(runner, "launch", lambda groups: events.append(
        ("launch", any(group.typed for group in groups.values()))) or launch(groups))
    started = threading.Event()
    if beside:
        document = small.submit(TranslationRequest(TEXTS * 4, "eng_Latn", "fra_Latn", options))
        document.subscribe(on_translation=lambda i, translation: started.set())
        assert started.wait(timeout=300)
    typed = small.submit(TranslationRequest(["Good morning, my friend."], "eng_Latn", "fra_Latn", options,
                                            priority=TYPED))
    typed.subscribe(on_translation=lambda i, translation: events.append(("typed done",)))
    found = typed.result(timeout=300)
    assert not beside or not document.done()  # it was still decoding
    assert texts(found) == texts(small.translate_full(["Good morning, my friend."], "eng_Latn", "fra_Latn", options))
    done = events.index(("typed done",))
    last_typed_step = max(i for i, event in enumerate(events[:done]) if event == ("launch", True))
    assert events[last_typed_step + 1:done] == []
    if beside:
        assert texts(document.result(timeout=300)) == texts(small.translate_full(TEXTS * 4, "eng_Latn", "fra_Latn",
                                                                                 options))
    small.teardown()


@pytest.mark.parametrize("typing", [False, True], ids=["nobody typing", "a person typing"])
def test_while_typed_text_is_expected_no_step_is_queued_behind_another(make_translator, monkeypatch, typing):
    """Pipelined, the host launches a step before it reads the one before, so typed text that comes
    waits on the device for two document steps. While a person types (`expect_typing`, at each
    keystroke in the window) each step is read before the next is launched: one in flight at most,
    the same translations."""
    small = make_translator(max_rows=16)
    monkeypatch.setattr(small.generator, "pipelined", True)
    options = small.default_options(num_beams=4, max_length=30)
    runner = small.generator.runner
    launch, finish = runner.launch, runner.finish
    in_flight, most = set(), []

    def launching(groups):
        step = launch(groups)
        in_flight.add(id(step))
        most.append(len(in_flight))
        return step

    def finishing(step):
        in_flight.discard(id(step))
        return finish(step)

    monkeypatch.setattr(runner, "launch", launching)
    monkeypatch.setattr(runner, "finish", finishing)
    if typing:
        small.expect_typing(600)
    got = small.submit(TranslationRequest(TEXTS[:4], "eng_Latn", "fra_Latn", options)).result(timeout=300)
    assert max(most) == (1 if typing else 2)
    monkeypatch.setattr(small.generator, "pipelined", False)
    assert texts(got) == texts(small.translate_full(TEXTS[:4], "eng_Latn", "fra_Latn", options))
    small.teardown()


@pytest.mark.parametrize("terms", [None, ["chat"]], ids=["plain", "with a term"])
def test_while_a_person_types_a_documents_steps_advance_its_oldest_rows_only_and_translate_the_same(
        make_translator, monkeypatch, terms):
    """Typed text that comes waits for the document's step in flight: while a person types, the
    scheduler paces the document (`Scheduler.pacing`), each step a few of its rows, which changes
    no translation."""
    small = make_translator(max_rows=32)
    small.generator.scheduler.paced_rows = 8
    options = small.default_options(num_beams=4, max_length=30)
    runner = small.generator.runner
    launch = runner.launch
    rows: list[int] = []

    def launching(groups):
        rows.append(sum(len(s.rows) for group in groups.values() for s in group.sentences))
        return launch(groups)

    monkeypatch.setattr(runner, "launch", launching)
    request = TranslationRequest(TEXTS, "eng_Latn", "fra_Latn", options,
                                 terms=None if terms is None else [terms] * len(TEXTS))
    small.expect_typing(600)
    paced = small.submit(request).result(timeout=300)
    assert max(rows) == 8
    rows.clear()
    small.expect_typing(0)  # no one types any more
    assert texts(paced) == texts(small.submit(request).result(timeout=300))
    assert max(rows) > 8  # steps of the whole batch again
    small.teardown()


class RunningStep:
    """A document step's device event, standing in for CUDA's on the CPU: the step runs for
    `seconds`, or until `ends()`."""

    def __init__(self, seconds: float, ends: Callable[[], bool] = lambda: False):
        self.until, self.ends = time.monotonic() + seconds, ends

    def query(self) -> bool:
        return self.ends() or time.monotonic() > self.until

    def synchronize(self) -> None:
        while not self.query():
            time.sleep(0.001)


def document_decoding_while_typing(engine, options, watching: threading.Event, step_running: threading.Event):
    """A long document submitted and decoding, then a person typing (`expect_typing`) and the
    document's steps watched (`watching`) until one runs (`step_running`): the document's handle."""
    started = threading.Event()
    document = engine.submit(TranslationRequest(TEXTS * 5, "eng_Latn", "fra_Latn", options))
    document.subscribe(on_translation=lambda i, translation: started.set())
    assert started.wait(timeout=300)
    engine.expect_typing(600)
    watching.set()
    assert step_running.wait(timeout=60)
    return document


def test_typed_text_that_comes_while_a_document_step_runs_is_queued_behind_it_before_that_step_is_read(
        make_translator, monkeypatch):
    """While a person types, the host waits for a document's step watching for typed text: typed
    text that comes meanwhile is admitted and its first step launched before that step is read, so
    that the device runs them back to back, not after the host has read the step, fed and planned.
    The device is a stand-in here (pipelined on the CPU): the document's step runs until the typed
    sentence is admitted, or for 5 s."""
    small = make_translator(max_rows=16)
    monkeypatch.setattr(small.generator, "pipelined", True)
    options = small.default_options(num_beams=4, max_length=30)
    runner = small.generator.runner
    launch, admit, finish = runner.launch, runner.admit, runner.finish
    events: list[tuple] = []  # ("document step" or "read", the step), ("typed admitted",)
    typed_admitted, step_running, watching = threading.Event(), threading.Event(), threading.Event()

    def launching(groups):
        step = launch(groups)
        if watching.is_set() and not any(g.typed for g in groups.values()):
            step.ready = RunningStep(5, typed_admitted.is_set)
            events.append(("document step", step))  # the step itself: an id could be reused once it is gone
            step_running.set()
        return step

    def admitting(sentences, requests, alone, group):
        admit(sentences, requests, alone, group)
        if group.typed:
            events.append(("typed admitted",))
            typed_admitted.set()

    def finishing(step):
        if isinstance(step.ready, RunningStep):
            events.append(("read", step))
        return finish(step)

    monkeypatch.setattr(runner, "launch", launching)
    monkeypatch.setattr(runner, "admit", admitting)
    monkeypatch.setattr(runner, "finish", finishing)
    document = document_decoding_while_typing(small, options, watching, step_running)
    typed = small.submit(TranslationRequest(["Good morning, my friend."], "eng_Latn", "fra_Latn", options,
                                            priority=TYPED))
    assert texts(typed.result(timeout=300)) == texts(small.translate_full(["Good morning, my friend."], "eng_Latn",
                                                                          "fra_Latn", options))
    running = next(rest[0] for what, *rest in events if what == "document step")  # the one typed text came in
    read = next(i for i, (what, *step) in enumerate(events) if what == "read" and step[0] is running)
    assert events.index(("typed admitted",)) < read, [what for what, *_ in events[:6]]
    document.result(timeout=300)
    small.teardown()


def test_a_document_that_comes_while_a_document_step_runs_does_not_cut_the_wait_for_that_step_short(
        make_translator, monkeypatch):
    """While a person types, only typed text ends the host's wait for a document's step early: a
    document submitted meanwhile is taken at the next step, and no step is queued behind the
    running one (which would hold typed text up by a step). The device is a stand-in (`RunningStep`):
    one document step runs for 0.5 s."""
    small = make_translator(max_rows=16)
    monkeypatch.setattr(small.generator, "pipelined", True)
    options = small.default_options(num_beams=4, max_length=30)
    runner = small.generator.runner
    launch = runner.launch
    slow: list = []  # the document step that runs for 0.5 s
    queued_behind_it: list[bool] = []  # at each launch after it: whether it was still running
    step_running, watching = threading.Event(), threading.Event()

    def launching(groups):
        if slow:
            queued_behind_it.append(not slow[0].ready.query())
        step = launch(groups)
        if watching.is_set() and not slow:
            step.ready = RunningStep(0.5)
            slow.append(step)
            step_running.set()
        return step

    monkeypatch.setattr(runner, "launch", launching)
    document = document_decoding_while_typing(small, options, watching, step_running)
    second = small.submit(TranslationRequest(TEXTS[:2], "eng_Latn", "fra_Latn", options))
    assert texts(second.result(timeout=300)) == texts(small.translate_full(TEXTS[:2], "eng_Latn", "fra_Latn",
                                                                           options))
    document.result(timeout=300)
    assert queued_behind_it and not any(queued_behind_it)
    small.teardown()


def test_errors_fail_their_handle_only(translator):
    from dragoman.engine import UnknownLanguageError

    with pytest.raises(UnknownLanguageError):
        translator.submit(TranslationRequest(TEXTS[:1], "xxx_Latn", "fra_Latn"))
    options = translator.default_options(num_beams=2, max_length=20)
    failing = translator.submit(TranslationRequest(TEXTS[:2], "eng_Latn", "fra_Latn", options))

    def broken(i, translation):
        raise OSError("disk full")

    failing.subscribe(on_translation=broken)
    fine = translator.submit(TranslationRequest(TEXTS[2:4], "eng_Latn", "fra_Latn", options))
    with pytest.raises(OSError, match="disk full"):
        failing.result(timeout=120)
    assert texts(fine.result(timeout=120)) == translator.translate(TEXTS[2:4], "eng_Latn", "fra_Latn", options)


def test_a_run_that_fails_before_taking_the_inbox_fails_what_waits_there_and_the_loop_goes_on(translator, monkeypatch):
    """Were the inbox left as it was, the loop would run again at once on the same submissions,
    raise again and never answer them."""
    from dragoman.engine.generator import Generator

    options = translator.default_options(num_beams=2, max_length=20)
    runs = []

    def broken_run(self, *args):
        runs.append(args)
        raise RuntimeError("the device is gone")

    with monkeypatch.context() as patch:
        patch.setattr(Generator, "run", broken_run)
        failing = translator.submit(TranslationRequest(TEXTS[:2], "eng_Latn", "fra_Latn", options))
        with pytest.raises(RuntimeError, match="the device is gone"):
            failing.result(timeout=60)
    assert len(runs) == 1
    fine = translator.submit(TranslationRequest(TEXTS[2:4], "eng_Latn", "fra_Latn", options))
    assert texts(fine.result(timeout=120)) == translator.translate(TEXTS[2:4], "eng_Latn", "fra_Latn", options)


def test_teardown_cancels_what_was_submitted_and_ends_the_loop(make_translator):
    small = make_translator(max_rows=8)
    options = small.default_options(num_beams=4, min_length=25, max_length=30)
    handle = small.submit(TranslationRequest(TEXTS * 3, "eng_Latn", "fra_Latn", options))
    thread = small.loop._thread
    small.teardown()
    assert handle.done() and not thread.is_alive()


def test_the_engine_thread_reads_the_weights_it_decodes_with(make_translator, monkeypatch):
    """On the CPU torch's OpenMP workers belong to the thread that first runs parallel work, and a
    second thread's workers beside the engine's made every step slower (docs/performance.md, "CPU"):
    the weights are read on the thread that decodes, not on the one that made the Translator."""
    import dragoman.engine.translator as translator_module
    from dragoman.engine.generator import Generator

    threads: dict[str, threading.Thread] = {}
    read, run = translator_module.load_weights, Generator.run

    def load_weights(*args):
        threads.setdefault("read", threading.current_thread())
        return read(*args)

    def generator_run(self, *args, **kwargs):
        threads.setdefault("run", threading.current_thread())
        return run(self, *args, **kwargs)

    monkeypatch.setattr(translator_module, "load_weights", load_weights)
    monkeypatch.setattr(Generator, "run", generator_run)
    translator = make_translator()
    assert translator.translate(["A short sentence."], "eng_Latn", "fra_Latn", translator.default_options(max_length=8))[0]
    assert threads["read"] is threads["run"] is not threading.current_thread()
    translator.teardown()


def test_the_loop_takes_the_interpreter_back_quickly_after_each_device_wait(make_translator, monkeypatch):
    """Once the engine's thread runs, the interpreter hands itself to a waiting thread within
    GIL_SWITCH_S (Python's default is 5 ms, which a busy thread beside it would add to every step);
    a shorter interval set by the application stays."""
    import sys

    from dragoman.engine.translator import GIL_SWITCH_S

    for before, after in ((0.005, GIL_SWITCH_S), (GIL_SWITCH_S / 2, GIL_SWITCH_S / 2)):
        monkeypatch.setattr(sys, "getswitchinterval", lambda: before)
        set_to = []
        monkeypatch.setattr(sys, "setswitchinterval", set_to.append)
        translator = make_translator()
        translator.translate(["A short sentence."], "eng_Latn", "fra_Latn", translator.default_options(max_length=8))
        assert set_to == [after]
        translator.teardown()


def test_idle_work_that_fails_is_said_once_and_leaves_the_engine_translating(make_translator, caplog):
    """A piece of the engine's idle work (weights to pack, steps to prepare) that raises would end
    the engine's thread: it is logged, the rest left undone, and translations go on."""
    from polling import wait_for

    translator = make_translator()
    done = []

    def failing():
        raise RuntimeError("no room for it")

    translator.loop.add_idle_work([lambda: done.append(1), failing, lambda: done.append(2)])
    assert wait_for(lambda: not translator.generator.idle_work)
    assert done == [1]
    assert [r.getMessage() for r in caplog.records if "idle time failed" in r.getMessage()]
    options = translator.default_options(num_beams=2, max_length=16)
    assert translator.translate(["Ein kurzer Satz"], "deu_Latn", "eng_Latn", options)[0]


def test_idle_work_left_counts_the_piece_still_running(make_translator):
    """A piece leaves the engine's idle work once done: an empty queue is work finished (what a
    caller waiting for prepared steps or packed weights watches)."""
    from polling import wait_for

    translator = make_translator()
    left_while_running = []
    translator.loop.add_idle_work([lambda: left_while_running.append(len(translator.generator.idle_work))] * 2)
    assert wait_for(lambda: not translator.generator.idle_work)
    assert left_while_running == [2, 1]


def test_texts_the_caller_tokenized_are_not_tokenized_again_and_translate_as_the_texts(translator, monkeypatch):
    """A request may carry its texts' source ids (`sources`, as a document's process sends them,
    tokenized with the engine's tokenizer): nothing of it is tokenized again, here or on the
    engine's thread, and the translations are the texts'. A blank text's entry is not used."""
    options = translator.default_options(num_beams=2, max_length=16)
    long = " ".join(TEXTS * 12)  # it goes in pieces
    given = TEXTS[:3] + ["", long]
    expected = texts(translator.translate_full(given, "eng_Latn", "fra_Latn", options))
    tokenizer = translator.tokenizer
    sources = [tokenizer.encode_source_pieces(text, "eng_Latn", translator.max_positions) if text else []
               for text in given]
    assert len(sources[-1]) > 1
    tokenized = []
    encode = tokenizer.encode_source
    monkeypatch.setattr(tokenizer, "encode_source", lambda *args: tokenized.append(args) or encode(*args))
    found = translator.submit(TranslationRequest(given, "eng_Latn", "fra_Latn", options, sources=sources))
    assert texts(found.result(timeout=300)) == expected
    assert tokenized == []


@pytest.mark.parametrize("wrong", ["an entry short", "an id past the vocabulary", "a piece past the positions",
                                   "no pieces"])
def test_sources_that_cannot_be_the_models_are_refused_before_any_work(translator, wrong):
    tokenizer = translator.tokenizer
    sources = [tokenizer.encode_source_pieces(text, "eng_Latn", translator.max_positions) for text in TEXTS[:2]]
    if wrong == "an entry short":
        sources.pop()
    elif wrong == "an id past the vocabulary":
        sources[1][0][1] = translator.config.vocab_size
    elif wrong == "a piece past the positions":
        sources[1] = [sources[1][0] * translator.max_positions]
    else:
        sources[1] = []
    with pytest.raises(OptionsError, match="^sources "):
        translator.submit(TranslationRequest(TEXTS[:2], "eng_Latn", "fra_Latn", sources=sources))
