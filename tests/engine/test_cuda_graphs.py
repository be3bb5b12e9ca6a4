"""The padded decoder step that CUDA graphs replay, run eagerly on the CPU: padding must change nothing."""

import torch
from polling import wait_for

from dragoman.engine.cuda_graphs import FINE_BUCKETS_FROM, bucket_for, step_bucket_for
from dragoman.engine.decoding import DecodingOptions
from dragoman.engine.generator import Generator, Request
from dragoman.engine.handle import TranslationRequest
from dragoman.engine.scheduler import DOCUMENT

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Привет, как дела?", "我们明天去北京。", "Ein kurzer Satz", "Hi"]


def test_buckets_are_powers_of_two_that_fit():
    assert [bucket_for(n) for n in (1, 2, 3, 4, 5, 17, 64, 65)] == [1, 2, 4, 4, 8, 32, 64, 128]


def test_step_buckets_pad_large_steps_by_less_than_a_quarter():
    sizes = range(1, 4097)
    assert all(step_bucket_for(n) == bucket_for(n) for n in sizes if n <= FINE_BUCKETS_FROM)
    for n in sizes[FINE_BUCKETS_FROM:]:
        size = step_bucket_for(n)
        assert n <= size <= bucket_for(n) and size % (bucket_for(n) // 8) == 0
        assert size - n < n // 4
    assert [step_bucket_for(n) for n in (65, 257, 300, 321, 513)] == [80, 320, 320, 384, 640]


def test_padded_steps_translate_exactly_like_unpadded_ones(translator, make_translator):
    padded = make_translator()
    padded.generator = Generator.build(padded.generator.model, max_rows=32, graphs=True)
    padded.generator.pipelined = True  # the GPU's order too: finished sentences sit a step out
    assert padded.generator.runner.graphs is not None
    # 4 beams and greedy: decoder step and search in one padded step, padding sentences of the padding row
    # rows among them; 3 beams do not divide a bucket: padded decoder step, search on the real rows.
    for options in (dict(num_beams=4, max_length=30), dict(num_beams=1, max_length=30), dict(num_beams=3, max_length=30)):
        expected = translator.translate(TEXTS, "eng_Latn", "fra_Latn", translator.default_options(**options))
        assert padded.translate(TEXTS, "eng_Latn", "fra_Latn", padded.default_options(**options)) == expected
    assert padded.generator.num_free_blocks() == padded.generator.num_total_blocks()  # the padding block is not capacity


def test_steps_padded_to_a_quarter_bucket_translate_exactly_like_unpadded_ones(translator, make_translator):
    """65 sentences of 4 beams: 260 rows, padded to 320 (`step_bucket_for`), not to 512."""
    padded = make_translator()
    padded.generator = Generator.build(padded.generator.model, max_rows=512, graphs=True)
    padded.generator.pipelined = True
    texts = [f"{text} {i}" for i in range(13) for text in TEXTS]
    options = dict(num_beams=4, max_length=20)
    expected = translator.translate(texts, "eng_Latn", "fra_Latn", translator.default_options(**options))
    sizes = []
    run = padded.generator.runner.graphs.run
    padded.generator.runner.graphs.run = lambda rows, key, step, size=None: (sizes.append(size), run(rows, key, step, size))[1]
    assert padded.translate(texts, "eng_Latn", "fra_Latn", padded.default_options(**options)) == expected
    assert 320 in sizes


def test_partial_results_of_graphed_steps_are_those_of_eager_ones(translator, make_translator):
    """A graphed step stores its done flags and each sentence's best hypothesis for the host itself
    (kernels.step_report), into one of two buffers in turn, as the host reads one step's while the
    next runs: the partial results streamed must be the eager steps', in the same order."""
    padded = make_translator()
    padded.generator = Generator.build(padded.generator.model, max_rows=32, graphs=True)
    padded.generator.pipelined = True

    def streamed(translator, options):
        seen = []
        out = translator.translate(TEXTS, "eng_Latn", "fra_Latn", translator.default_options(**options),
                                   on_partial=lambda i, text: seen.append((i, text)))
        return out, seen

    for options in (dict(num_beams=4, max_length=30), dict(num_beams=1, max_length=30)):
        expected, expected_seen = streamed(translator, options)
        assert len(expected_seen) > 2 * len(TEXTS)
        assert streamed(padded, options) == (expected, expected_seen)
    assert len(padded.generator.runner._reports) == 4  # (beams, greedy) x the two buffers


def test_the_warm_up_prepares_the_steps_of_a_typed_sentence_in_the_window(make_translator):
    """Translator.warm_up runs the steps the window's typed text runs (its options, its partial
    results), so that the first sentence a person types captures no graph: here, no new report
    buffers (they are keyed as the graphs are)."""
    translator = make_translator()
    translator.generator = Generator.build(translator.generator.model, max_rows=32, graphs=True)
    options = dict(num_beams=4, max_length=40)
    translator.warm_up(**options)
    keys = set(translator.generator.runner._reports)
    assert keys
    translator.translate([TEXTS[0]], "eng_Latn", "deu_Latn", translator.default_options(**options),
                         on_partial=lambda i, text: None)
    assert set(translator.generator.runner._reports) == keys


def test_padding_rows_leave_real_rows_logits_alone(make_translator):
    translator = make_translator()
    tok = translator.tokenizer
    options = DecodingOptions(num_beams=1, max_length=10)

    def three_rows(generator):
        scheduler = generator.scheduler
        scheduler.start([generator._ticket_for(Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"),
                                                       options))
                         for text in TEXTS[:3]])
        generator._admit(scheduler.schedule(generator.num_free_blocks(), generator.cross_cache.num_free_blocks(),
                                            generator._acquire_adapter))
        rows = torch.tensor([r for s in scheduler.running for r in s.rows])
        _, logits = generator.runner.run_rows(rows, with_lora=False, with_logits=True)  # 3 rows run as a bucket of 4
        return logits.clone()

    padded = Generator.build(translator.generator.model, max_rows=8, graphs=True)
    plain = Generator.build(translator.generator.model, max_rows=8, graphs=False)
    # Equal up to the rounding of a 4-row matmul against a 3-row one; a disturbed row would be far off.
    torch.testing.assert_close(three_rows(padded), three_rows(plain), rtol=1e-4, atol=1e-4)


def test_a_step_copies_its_rows_only_when_they_change(make_translator):
    model = make_translator().generator.model
    graphs = Generator.build(model, max_rows=8, graphs=True).runner.graphs
    fed = []

    def step(padded):
        fed.append(padded.tolist())

    group_rows = torch.tensor([[3, 1], [2, 0]])  # (S, B), as a group hands them over step after step
    graphs.run(group_rows.reshape(-1), ("key",), step)
    copies = graphs.rows._version
    graphs.run(group_rows.reshape(-1), ("key",), step)
    assert graphs.rows._version == copies  # the same rows again: nothing copied
    group_rows[1, 0] = 5  # changed in place
    graphs.run(group_rows.reshape(-1), ("key",), step)
    graphs.run(torch.tensor([3, 1, 5]), ("key",), step)  # other memory, padded to a bucket of 4
    graphs.run(group_rows.reshape(-1)[:2], ("key",), step)  # a part of the same memory
    graphs.run(group_rows.t().reshape(-1), ("key",), step)  # the same values in another order
    padding_row = graphs.padding_row
    assert fed == [[3, 1, 2, 0], [3, 1, 2, 0], [3, 1, 5, 0], [3, 1, 5, padding_row], [3, 1], [3, 5, 1, 0]]


def plain_and_folded(make_translator, monkeypatch):
    """Two translators with graphs, one folding lone short sources (FoldedSources, pipelined as on
    the GPU) and one not, and the S of each `kernels.source_scores` call, as it is made."""
    from dragoman import kernels

    plain = make_translator()
    plain.generator = Generator.build(plain.generator.model, max_rows=32, graphs=True, fold_sources=False)
    folded = make_translator()
    folded.generator = Generator.build(folded.generator.model, max_rows=32, graphs=True, fold_sources=True)
    folded.generator.pipelined = True
    scored_at: list[int] = []
    source_scores = kernels.source_scores
    monkeypatch.setattr(kernels, "source_scores", lambda *args: scored_at.append(args[-1]) or source_scores(*args))
    return plain, folded, scored_at


def test_a_lone_short_sentence_reads_its_folded_source_and_translates_as_through_the_cache(make_translator, monkeypatch):
    """A sentence admitted alone with a source of at most 64 tokens decodes through its folded
    source (FoldedSources: kernels.source_scores), at S 16, 32 or 64; a longer one, and sentences
    admitted together, through the source cache. Same translations either way (float32)."""
    plain, folded, scored_at = plain_and_folded(make_translator, monkeypatch)
    texts = {"Hi": 16, "Привет, как дела?": 16, "The quick brown fox jumps.": 32, TEXTS[0]: 64,  # 4, 15, 25, 36 tokens
             "The quick brown fox jumps over the lazy dog, and then it runs far away into the woods.": None}  # 66
    for options in (dict(num_beams=4, max_length=30), dict(num_beams=1, max_length=30)):
        for text, S in texts.items():
            scored_at.clear()
            expected = plain.translate([text], "eng_Latn", "fra_Latn", plain.default_options(**options))
            assert folded.translate([text], "eng_Latn", "fra_Latn", folded.default_options(**options)) == expected
            assert set(scored_at) == ({S} if S else set())
        scored_at.clear()
        expected = plain.translate(TEXTS[1:], "eng_Latn", "fra_Latn", plain.default_options(**options))
        assert folded.translate(TEXTS[1:], "eng_Latn", "fra_Latn", folded.default_options(**options)) == expected
        assert not scored_at
    assert folded.generator.runner.folded_sentence is None  # let go once its sentence left


def test_typed_text_beside_a_document_reads_its_folded_source_and_translates_as_through_the_cache(make_translator,
                                                                                                  monkeypatch):
    """Typed text admitted while a document decodes steps alone (the document sits its steps out),
    so its source is folded as into an empty batch: the same translations, the document's too."""
    from dragoman.engine import TYPED, TranslationRequest

    plain, folded, scored_at = plain_and_folded(make_translator, monkeypatch)
    options = dict(num_beams=4, max_length=30)
    typed_text, submitted, steps = "The quick brown fox jumps.", [], []  # 25 tokens: S 32

    def on_partial(i, text):  # from the engine's thread, a few steps into the document
        steps.append(i)
        if steps.count(0) == 3 and not submitted:
            submitted.append(folded.submit(TranslationRequest([typed_text], "eng_Latn", "fra_Latn",
                                                              folded.default_options(**options), priority=TYPED)))

    document = folded.submit(TranslationRequest(TEXTS[1:4], "eng_Latn", "fra_Latn", folded.default_options(**options),
                                                partials=True))
    document.subscribe(on_partial=on_partial)
    assert [t.text for t in document.result(timeout=300)] == plain.translate(TEXTS[1:4], "eng_Latn", "fra_Latn",
                                                                           plain.default_options(**options))
    [typed] = submitted
    assert [t.text for t in typed.result(timeout=300)] == plain.translate([typed_text], "eng_Latn", "fra_Latn",
                                                                         plain.default_options(**options))
    assert set(scored_at) == {32}
    assert folded.generator.runner.folded_sentence is None


def test_a_sentence_admitted_alone_sets_its_rows_up_from_one_buffer(translator, make_translator, monkeypatch):
    """A sentence admitted alone (typed text) copies what its rows need into AdmissionGraphs' buffer
    and sets them up from there (a graph replay on the GPU; eagerly here), also while others run;
    sentences admitted together do not. Same translations as without graphs, beam and greedy."""
    staged = make_translator()
    staged.generator = Generator.build(staged.generator.model, max_rows=8, graphs=True)
    staged.generator.pipelined = True
    admissions = staged.generator.runner.admission_graphs
    runs = []
    run = admissions.run
    monkeypatch.setattr(admissions, "run", lambda lists, set_up: runs.append(len(lists[0])) or run(lists, set_up))
    for options in (dict(num_beams=4, max_length=30), dict(num_beams=1, max_length=30)):
        beams = options["num_beams"]
        for text in TEXTS[:3]:  # sources of other lengths: other shapes of the buffer's views
            runs.clear()
            expected = translator.translate([text], "eng_Latn", "fra_Latn", translator.default_options(**options))
            assert staged.translate([text], "eng_Latn", "fra_Latn", staged.default_options(**options)) == expected
            assert runs == [beams]
        # 8 rows: beam 4 admits two sentences together, later some alone while another runs; greedy all at once
        runs.clear()
        expected = translator.translate(TEXTS, "eng_Latn", "fra_Latn", translator.default_options(**options))
        assert staged.translate(TEXTS, "eng_Latn", "fra_Latn", staged.default_options(**options)) == expected
        assert (0 < len(runs) < len(TEXTS) - 1 and set(runs) == {4}) if beams == 4 else runs == []
    assert staged.generator.num_free_blocks() == staged.generator.num_total_blocks()


def test_a_documents_steps_prepared_on_padding_rows_change_no_translation(translator, make_translator, monkeypatch):
    """`Translator.prepare_document_steps` runs (on a GPU: and captures) a plain group's step at
    every row count on padding rows alone, in the engine's spare time: run between a document's
    own steps here, they change none of its translations, and their row counts are those its
    steps use."""
    from dragoman.engine import translator as translator_module

    padded = make_translator()
    padded.generator = Generator.build(padded.generator.model, max_rows=64, graphs=True)
    padded.generator.pipelined = True
    runner = padded.generator.runner
    options = dict(num_beams=4, max_length=24)
    texts = [f"{text} {i}" for i in range(4) for text in TEXTS]
    expected = translator.translate(texts, "eng_Latn", "fra_Latn", translator.default_options(**options))
    prepared, used = [], []
    prepare_step, run = runner.prepare_step, runner.graphs.run
    monkeypatch.setattr(runner, "prepare_step", lambda *args: (prepared.append(args[1:]), prepare_step(*args))[1])
    monkeypatch.setattr(runner.graphs, "run",
                        lambda rows, key, step, size=None: (used.append((size, key)), run(rows, key, step, size))[1])
    monkeypatch.setattr(padded, "needs_warm_up", lambda: True)  # a GPU's: the CPU prepares none
    monkeypatch.setattr(translator_module, "IDLE_WORK_AFTER_STEPS", 1)  # a piece a step, among the document's
    with padded.loop._wake:  # held: the loop takes no piece before the document comes
        padded.prepare_document_steps(**options)
        handle = padded.submit(TranslationRequest(texts, "eng_Latn", "fra_Latn", padded.default_options(**options),
                                                  priority=DOCUMENT))
    assert [t.text for t in handle.result()] == expected
    assert wait_for(lambda: not padded.generator.idle_work)  # any left after the document: once idle
    sizes = runner.step_sizes(padded.default_options(**options))
    assert sorted(prepared) == sorted((size, parity) for size in sizes for parity in (0, 1))
    documents = {size for size, key in used if key[0] is False and key[3] in (0, 1) and len(key) == 7}
    assert documents and documents <= set(sizes)
