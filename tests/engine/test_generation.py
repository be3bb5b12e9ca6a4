"""Our decoding against transformers' `generate` on the same random checkpoint, in float32.

Correct means token-identical: every option set, every language pair, batched against one at a time.
"""

import pytest
import torch

from dragoman.engine.decoding import DecodingOptions
from dragoman.engine.generator import Request

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Bonjour, comment allez-vous aujourd'hui ?",
    "Привет, как дела?",
    "我们明天去北京。",
    "नमस्ते, आप कैसे हैं?",
    "Ein kurzer Satz",
    "Καλημέρα σας, φίλοι μου, τι κάνετε σήμερα το πρωί;",
    "مرحبا",
]

OPTION_SETS = [
    dict(num_beams=1, max_length=40),
    dict(num_beams=4, max_length=40),
    dict(num_beams=4, length_penalty=0.5, max_length=40),
    dict(num_beams=3, length_penalty=2.0, max_length=12),
    dict(num_beams=4, no_repeat_ngram_size=2, max_length=40),
    dict(num_beams=4, repetition_penalty=1.3, max_length=40),
    dict(num_beams=1, repetition_penalty=1.5, no_repeat_ngram_size=3, max_length=30),
    dict(num_beams=4, early_stopping=True, max_length=40),
    dict(num_beams=5, early_stopping="never", length_penalty=1.5, max_length=30),
    dict(num_beams=2, min_length=15, max_length=25),
]


def hf_generate(hf_model, hf_tokenizer, text, src, tgt, options):
    hf_tokenizer.src_lang = src
    inputs = hf_tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = hf_model.generate(
            **inputs, forced_bos_token_id=hf_tokenizer.convert_tokens_to_ids(tgt), do_sample=False, **options
        )
    ids = out[0].tolist()
    while ids[-1] == hf_tokenizer.pad_token_id:
        ids.pop()
    return ids, hf_tokenizer.decode(out[0], skip_special_tokens=True)


@pytest.mark.parametrize("pipelined", [False, True], ids=["steps finished at once", "pipelined as on the GPU"])
@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_batched_translation_equals_generate_one_at_a_time(translator, hf_model, hf_tokenizer, options, pipelined,
                                                           monkeypatch):
    monkeypatch.setattr(translator.generator, "pipelined", pipelined)  # the CPU's order, and the GPU's
    src, tgt = "eng_Latn", "fra_Latn"
    ours = translator.translate(TEXTS, src, tgt, translator.default_options(**options))
    for text, our in zip(TEXTS, ours):
        _, expected = hf_generate(hf_model, hf_tokenizer, text, src, tgt, options)
        assert our == expected, text


def test_mixed_language_pairs_in_one_batch(translator, hf_model, hf_tokenizer):
    pairs = [("eng_Latn", "deu_Latn"), ("fra_Latn", "zho_Hans"), ("rus_Cyrl", "eng_Latn"), ("hin_Deva", "arb_Arab")]
    cases = [(text, src, tgt) for text in TEXTS[:4] for src, tgt in pairs]
    options = DecodingOptions(num_beams=4, max_length=40)
    tok = translator.tokenizer
    requests = [Request(tok.encode_source(text, src), tok.decoder_prefix(tgt), options) for text, src, tgt in cases]
    results = [r.result for r in translator.generator.run(requests)]
    for (text, src, tgt), result in zip(cases, results):
        expected, _ = hf_generate(hf_model, hf_tokenizer, text, src, tgt, dict(num_beams=4, max_length=40))
        assert result == expected, (text, src, tgt)


def test_forced_length_matches_generate_with_min_and_max_new_tokens(translator, hf_model, hf_tokenizer):
    """The benchmarks force the output length this way: same semantics as HF's min/max_new_tokens."""
    options = DecodingOptions(num_beams=4, min_new_tokens=20, max_new_tokens=20)
    tok = translator.tokenizer
    [request] = translator.generator.run(
        [Request(tok.encode_source(TEXTS[0], "eng_Latn"), tok.decoder_prefix("fra_Latn"), options)]
    )
    result = request.result
    expected, _ = hf_generate(
        hf_model, hf_tokenizer, TEXTS[0], "eng_Latn", "fra_Latn", dict(num_beams=4, min_new_tokens=20, max_new_tokens=20)
    )
    assert result == expected
    assert len(result) == 21  # the start token, then exactly 20 new ones


@pytest.mark.parametrize("forced_eos", [False, True], ids=["", "forced </s>"])
@pytest.mark.parametrize("beams", [1, 4])
def test_sentences_of_one_search_stop_at_their_own_max_length(translator, hf_model, hf_tokenizer, monkeypatch, beams,
                                                             forced_eos):
    """`Request.max_length` caps one sentence below its options' without a search of its own: each
    result is generate's with that max_length. With forced `</s>` (a processor that reads
    max_length) sentences of different caps search apart."""
    generator, tok = translator.generator, translator.tokenizer
    monkeypatch.setattr(generator, "pipelined", True)  # as on the GPU
    searches = []
    eager = generator.runner._search_eagerly
    monkeypatch.setattr(generator.runner, "_search_eagerly",
                        lambda live, *a: searches.append(len(live)) or eager(live, *a))
    eos = tok.eos_id
    ours = translator.default_options(num_beams=beams, max_length=30, forced_eos_id=eos if forced_eos else None)
    caps = [None, 7, 12, 40, 3]  # 40: above the options', which then hold
    requests = [Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"), ours, max_length=cap)
                for text, cap in zip(TEXTS, caps)]
    generator.run(requests)
    for text, cap, request in zip(TEXTS, caps, requests):
        theirs = dict(num_beams=beams, max_length=min(cap or 30, 30)) | (dict(forced_eos_token_id=eos) if forced_eos else {})
        expected, _ = hf_generate(hf_model, hf_tokenizer, text, "eng_Latn", "fra_Latn", theirs)
        assert request.result == expected, cap
    assert (max(searches) > 1) == forced_eos
    assert generator.rows.num_free_rows() == generator.rows.capacity


def admissions(generator, monkeypatch, requests, feed=None):
    """Runs the requests; returns, for each admission, (rows free before it, the requests it admitted)."""
    seen = []
    admit = generator.runner.admit

    def recording(sentences, requests, *args):
        seen.append((generator.rows.num_free_rows() - (generator.rows.capacity - generator.max_rows), list(requests)))
        return admit(sentences, requests, *args)

    monkeypatch.setattr(generator.runner, "admit", recording)
    generator.run(requests, feed=feed)
    return seen


def capped(tok, texts, caps, priority=1):
    """Greedy requests that each end exactly at their cap (decoder length), `</s>` banned before."""
    options = DecodingOptions(num_beams=1, min_new_tokens=100, max_new_tokens=100)  # each ends at its cap
    return [Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"), options, priority,
                    max_length=cap) for text, cap in zip(texts, caps)]


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
def test_document_sentences_join_running_ones_once_a_share_of_the_rows_is_free(translator, monkeypatch, share):
    """Sentences that finish a few at a time free rows a few at a time: waiting document sentences
    join only once `admit_share` of the rows is free (0: as soon as one fits; 1: the batch drains),
    or when all that wait fit; results are the same either way."""
    generator, tok = translator.generator, translator.tokenizer
    monkeypatch.setattr(generator, "max_rows", 8)
    monkeypatch.setattr(generator, "admit_share", share)
    caps = [4 + (3 * i) % 11 for i in range(24)]  # sentences of 3-13 new tokens, finishing at different steps
    requests = capped(tok, (TEXTS * 3)[:24], caps)
    seen = admissions(generator, monkeypatch, requests)
    assert [len(r.result) for r in requests] == caps
    later = seen[1:-1]  # the first fills the batch; the last takes whatever still waits
    assert all(free >= share * 8 for free, _ in later)
    assert any(free < 8 for free, _ in later) == (share < 1)
    if share == 0:
        assert any(len(admitted) == 1 for _, admitted in later)
    alone = capped(tok, (TEXTS * 3)[:24], caps)
    monkeypatch.setattr(generator, "max_rows", 32)
    generator.run(alone)
    assert [r.result for r in requests] == [r.result for r in alone]


def test_typed_text_joins_a_running_document_at_once(translator, monkeypatch):
    """Typed text (priority 0) that `feed` gives while a document waits for rows to free up goes
    ahead of the document's waiting sentences and joins as soon as it fits."""
    generator, tok = translator.generator, translator.tokenizer
    monkeypatch.setattr(generator, "max_rows", 8)
    monkeypatch.setattr(generator, "admit_share", 1.0)  # documents wait for the batch to drain
    document = capped(tok, (TEXTS * 2)[:12], [20 - i for i in range(12)])
    typed = capped(tok, TEXTS[:1], [6], priority=0)
    portions = [[], [], [], typed]  # arrives a few steps in, while all 8 rows are taken

    def feed(idle):
        return portions.pop(0) if portions else None

    seen = admissions(generator, monkeypatch, document, feed)
    at = next(i for i, (_, admitted) in enumerate(seen) if typed[0] in admitted)
    assert seen[at][1] == typed and at == 1  # alone, before the document's next sentences
    assert len(typed[0].result) == 6 and all(len(r.result) == 20 - i for i, r in enumerate(document))


@pytest.mark.parametrize("pipelined", [False, True])
def test_typed_text_steps_alone_while_the_document_waits(translator, monkeypatch, pipelined):
    """While typed text runs, each step advances it alone (so it decodes at the latency it has with
    nothing else running); the document's sentences sit those steps out and go on where they were.
    Every result is the one it gets alone."""
    generator, tok = translator.generator, translator.tokenizer
    monkeypatch.setattr(generator, "pipelined", pipelined)
    monkeypatch.setattr(generator, "max_rows", 20)  # the document's 16 rows and the typed sentence's 4
    options = DecodingOptions(num_beams=4, min_new_tokens=10, max_new_tokens=10)

    def requests(texts, priority):
        return [Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"), options, priority)
                for text in texts]

    document, typed = requests(TEXTS[:4], 1), requests(TEXTS[-1:], 0)
    portions = [[], [], typed]  # arrives a few steps in
    ran = []  # each step's requests
    runner = generator.runner
    launch = runner.launch

    def recording(groups):
        step = launch(groups)
        ran.append([runner.requests[s] for s in step.sentences])
        return step

    monkeypatch.setattr(runner, "launch", recording)
    generator.run(document, feed=lambda idle: portions.pop(0) if portions else None)
    first = next(i for i, sentences in enumerate(ran) if typed[0] in sentences)
    last = max(i for i, sentences in enumerate(ran) if typed[0] in sentences)
    assert all(sentences == typed for sentences in ran[first : last + 1])
    assert last - first + 1 == 9  # 10 new tokens: the language code (its prefix), then a step each
    assert set(ran[first - 1]) == set(ran[last + 1]) == set(document)  # the document before and after, all of it
    alone = requests(TEXTS[:4], 1) + requests(TEXTS[-1:], 0)
    generator.run(alone)
    assert [r.result for r in document + typed] == [r.result for r in alone]


@pytest.mark.parametrize("beams", [1, 4])
def test_no_step_runs_once_every_sentence_is_at_its_length_limit(translator, monkeypatch, beams):
    """Pipelined (as on the GPU), a sentence whose hypotheses reach max_length is done whatever the step
    finds: once every running one is, no further step is queued (it would only keep the device busy)."""
    generator, tok = translator.generator, translator.tokenizer
    monkeypatch.setattr(generator, "pipelined", True)  # as on the GPU
    steps = []
    launch = generator.runner.launch
    monkeypatch.setattr(generator.runner, "launch", lambda groups: steps.append(launch(groups)) or steps[-1])
    limits = [9, 14]  # new tokens of two sentences decoding together: the language code, then the rest
    requests = [
        Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"),
                DecodingOptions(num_beams=beams, min_new_tokens=n, max_new_tokens=n))
        for text, n in zip(TEXTS, limits)
    ]
    generator.run(requests)
    assert [len(r.result) for r in requests] == [1 + n for n in limits]
    assert len(steps) == max(limits) - 1  # the prefix step feeds `</s>`; each step then adds one token
    assert generator.rows.num_free_rows() == generator.rows.capacity


@pytest.mark.parametrize("beams", [1, 4])
def test_a_beam_sentence_feeds_its_start_token_in_its_first_step(translator, monkeypatch, beams):
    """Sentences of several beams with the usual prefix run no step without logits at admission: beam
    1 feeds `</s>` in the first step while the others feed the language code (the translations are
    checked against generate above); a greedy sentence still feeds `</s>` in a step of its own."""
    generator, tok = translator.generator, translator.tokenizer
    runs = []
    run = generator.runner.run_rows
    monkeypatch.setattr(generator.runner, "run_rows", lambda *args, **kwargs: runs.append(kwargs) or run(*args, **kwargs))
    options = translator.default_options(num_beams=beams, max_length=12)
    fra = tok.decoder_prefix("fra_Latn")
    requests = [Request(tok.encode_source(text, "eng_Latn"), fra, options) for text in TEXTS[:3]]
    generator.run(requests)
    assert [kwargs["with_logits"] for kwargs in runs].count(False) == (1 if beams == 1 else 0)
    assert all(len(r.result) > 2 for r in requests)
    assert (generator.rows.prior_offset == 0).all()


@pytest.mark.parametrize("beams", [1, 4])
def test_decoder_prefixes_of_any_length_start_together_as_generate_continues_them(translator, hf_model, hf_tokenizer, beams,
                                                                                 monkeypatch):
    """Admission feeds each sentence's prefix but its last token before the sentence scores; prefixes
    of different lengths (`</s>` alone, `</s>` and the language code, or more) start in one batch."""
    tok = translator.tokenizer
    fra = tok.decoder_prefix("fra_Latn")
    words = tok.encode_source("Bonjour mes amis", "fra_Latn")[1:4]
    prefixes = [fra, fra[:1], fra + words, fra + words[:1]]
    options = dict(num_beams=beams, max_length=16)
    requests = [Request(tok.encode_source(text, "eng_Latn"), prefix, translator.default_options(**options))
                for text, prefix in zip(TEXTS, prefixes)]
    runner, started = translator.generator.runner, []
    admit = runner.admit

    def admitting(sentences, requests, *args):
        admit(sentences, requests, *args)
        started.extend((len(r.prefix), s.cached, len(s.blocks)) for s, r in zip(sentences, requests))

    monkeypatch.setattr(runner, "admit", admitting)
    translator.generator.run(requests)
    # As the scheduler counts them: len(prefix) - 1 positions cached, in blocks taken for every beam.
    assert sorted(started) == sorted((n, n - 1, beams * -(-(n - 1) // 16)) for n in map(len, prefixes))
    hf_tokenizer.src_lang = "eng_Latn"
    for text, prefix, request in zip(TEXTS, prefixes, requests):
        inputs = hf_tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            out = hf_model.generate(**inputs, decoder_input_ids=torch.tensor([prefix]), do_sample=False, **options)
        expected = out[0].tolist()
        while expected[-1] == hf_tokenizer.pad_token_id:
            expected.pop()
        assert request.result == expected, prefix
    assert translator.generator.num_free_blocks() == translator.generator.num_total_blocks()


@pytest.mark.parametrize("beams", [1, 4])
def test_a_sentence_sitting_a_step_out_leaves_the_others_cache_alone(make_translator, translator, beams):
    """Pipelined, a finished sentence's rows sit the step launched meanwhile out as the padding row,
    which writes its K/V into a block of its own. Without CUDA graphs that block was never set aside,
    so the padding row wrote into block 0: on a fresh engine, the first sentence's, changing its
    result (found on the CPU, which pipelined its steps then)."""
    tok = translator.tokenizer
    fresh = make_translator()

    def request(text, max_length):
        options = fresh.default_options(num_beams=beams, max_length=max_length)
        return Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"), options)

    first, short = request(TEXTS[0], 20), request(TEXTS[1], 6)  # the first admitted takes the first free block
    fresh.generator.pipelined = True  # as on the GPU: the short one sits a step out
    fresh.generator.run([first, short])
    alone = request(TEXTS[0], 20)
    translator.generator.run([alone])
    assert first.result == alone.result


def test_on_the_cpu_each_step_is_finished_before_the_next_is_launched(translator, monkeypatch):
    """A CPU step has run by the time it is launched, so nothing is pipelined: a finished sentence
    leaves before the next step instead of sitting it out (the GPU's order), with the same results."""
    generator, tok = translator.generator, translator.tokenizer
    assert not generator.pipelined
    carried = []  # per launched step: whether it carried a sentence already done
    launch = generator.runner.launch

    def spy(groups):
        rows = [r for group in groups.values() for s in group.sentences for r in s.rows]
        carried.append(bool(generator.rows.finished[rows].any()))
        return launch(groups)

    monkeypatch.setattr(generator.runner, "launch", spy)
    results = {}
    for pipelined in (False, True):
        monkeypatch.setattr(generator, "pipelined", pipelined)
        carried.clear()
        requests = [Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"),
                            DecodingOptions(num_beams=4, min_new_tokens=n, max_new_tokens=n))
                    for text, n in zip(TEXTS, [12, 5])]
        generator.run(requests)
        results[pipelined] = [r.result for r in requests]
        assert any(carried) == pipelined
    assert results[False] == results[True]


def test_a_small_cache_preempts_and_still_gives_the_same_answers(make_translator, translator):
    """With room for about one sentence the scheduler must preempt and requeue; results must not change."""
    options = translator.default_options(num_beams=4, max_length=40)
    expected = translator.translate(TEXTS, "eng_Latn", "spa_Latn", options)
    cramped = make_translator(cache_tokens=4 * 48 + 16)  # + the padding block
    assert cramped.translate(TEXTS, "eng_Latn", "spa_Latn", options) == expected
    assert cramped.generator.num_free_blocks() == cramped.generator.num_total_blocks()


@pytest.mark.parametrize("pipelined", [False, True], ids=["steps finished at once", "pipelined as on the GPU"])
def test_texts_past_those_that_decode_together_are_fed_while_steps_run(make_translator, hf_model, hf_tokenizer,
                                                                       pipelined, monkeypatch):
    """Texts past the sentences that decode together are tokenized in portions while steps run
    (Generator.run's `feed`, the engine's loop), and each translation is decoded once its request is done (`on_done`):
    the answers are generate's, blank texts stay blank, and nothing is fed twice."""
    import dragoman.engine.translator

    small = make_translator(max_rows=8)  # 2 sentences of 4 beams at once
    monkeypatch.setattr(small.generator, "pipelined", pipelined)
    monkeypatch.setattr(dragoman.engine.translator, "FEED_TEXTS", 2)
    portions = []
    run = small.generator.run

    def counting_portions(requests, feed, *rest):
        def counted(idle):
            more = feed(idle)
            portions.append(None if more is None else len(more))
            return more

        return run(requests, counted, *rest)

    monkeypatch.setattr(small.generator, "run", counting_portions)
    options = dict(num_beams=4, max_length=30)
    texts = TEXTS[:4] + ["", "  "] + TEXTS[4:] + TEXTS[:3]
    ours = small.translate(texts, "eng_Latn", "deu_Latn", small.default_options(**options))
    assert ours == [hf_generate(hf_model, hf_tokenizer, text, "eng_Latn", "deu_Latn", options)[1] if text.strip() else ""
                    for text in texts]
    # 11 texts: 2 before the first step, then 9 fed two a step; the run ends once nothing is left
    assert [n for n in portions if n] == [2, 2, 2, 2, 2, 1]
    assert portions[-1] is None and None not in portions[:-1]
    assert small.generator.num_free_blocks() == small.generator.num_total_blocks()


def test_partial_hypotheses_stream_before_the_result(translator):
    seen: list[tuple[int, str]] = []
    options = translator.default_options(num_beams=4, min_length=12, max_length=20)
    [final] = translator.translate([TEXTS[0]], "eng_Latn", "ita_Latn", options, on_partial=lambda i, t: seen.append((i, t)))
    assert len(seen) >= 10  # one per decoding step
    assert all(i == 0 for i, _ in seen)
    assert seen[-1][1] != final or len(seen) > 1


def test_blank_lines_stay_blank_and_stop_returns_early(translator):
    assert translator.translate(["", "   "], "eng_Latn", "fra_Latn") == ["", ""]
    assert translator.translate(TEXTS[:2], "eng_Latn", "fra_Latn", should_stop=lambda: True) == [None, None]


def test_unknown_language_is_refused_with_suggestions(translator):
    from dragoman.engine.languages import UnknownLanguageError

    with pytest.raises(UnknownLanguageError, match="fra_Latn"):
        translator.translate(["hello"], "eng_Latn", "fra_latn")


def test_out_of_gpu_memory_shrinks_the_batch_and_carries_on(make_translator, translator, monkeypatch, caplog):
    """A step too big for the GPU is retried with fewer rows, and the answers do not change. (A real
    out-of-memory needs a GPU: here the decoder step raises torch's own error above 8 rows.)"""
    options = translator.default_options(num_beams=4, max_length=30)
    expected = translator.translate(TEXTS, "eng_Latn", "por_Latn", options)
    small = make_translator(max_rows=32)
    model = small.generator.model
    decode_step = model.decode_step

    def limited(tokens, *args, **kwargs):
        if tokens.shape[0] > 8:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return decode_step(tokens, *args, **kwargs)

    monkeypatch.setattr(model, "decode_step", limited)
    assert small.translate(TEXTS, "eng_Latn", "por_Latn", options) == expected
    assert small.generator.max_rows == 8
    assert "out of GPU memory" in caplog.text
    assert small.generator.num_free_blocks() == small.generator.num_total_blocks()
    assert small.generator.rows.num_free_rows() == small.generator.rows.capacity

    monkeypatch.setattr(model, "decode_step", lambda *a, **k: (_ for _ in ()).throw(torch.cuda.OutOfMemoryError("full")))
    with pytest.raises(torch.cuda.OutOfMemoryError):  # not even one sentence fits: the caller hears of it
        small.translate(TEXTS[:1], "eng_Latn", "por_Latn", options)


def test_a_text_longer_than_the_model_reads_goes_in_pieces(translator):
    """A text past the model's positions is cut between words into pieces that fit, none lost,
    and its translation is the pieces' translations joined."""
    tok, limit = translator.tokenizer, translator.generator.model.max_positions
    text = " ".join(TEXTS * 12)
    assert len(tok.encode_source(text, "eng_Latn")) > limit
    pieces = translator._sources(text, "eng_Latn")
    assert len(pieces) > 1 and all(len(p) <= limit for p in pieces)
    assert " ".join(tok.decode(p) for p in pieces) == tok.decode(tok.encode_source(text, "eng_Latn"))
    options = translator.default_options(num_beams=2, max_length=20)
    alone = translator.generator.run([Request(p, tok.decoder_prefix("fra_Latn"), options) for p in pieces])
    [result] = translator.translate([text], "eng_Latn", "fra_Latn", options)
    assert result == " ".join(tok.decode(r.result) for r in alone)


@pytest.mark.parametrize("beams", [1, 4])
def test_a_sentence_found_done_sits_out_the_step_launched_meanwhile(translator, hf_model, hf_tokenizer, beams):
    """The host reads which sentences a step finished while the device already runs the next step:
    that step must leave a finished sentence's rows as they were, or its result would change before
    the host reads it. (Ended by max_length, every candidate finishes; another step would add more.)"""
    generator, tok = translator.generator, translator.tokenizer
    scheduler, runner = generator.scheduler, generator.runner
    request = Request(tok.encode_source(TEXTS[6], "eng_Latn"), tok.decoder_prefix("fra_Latn"),
                      DecodingOptions(num_beams=beams, max_length=7))
    scheduler.start([generator._ticket_for(request)])
    generator._admit(scheduler.schedule(generator.num_free_blocks(), generator.cross_cache.num_free_blocks(),
                                        generator._acquire_adapter))
    [sentence] = scheduler.running
    while not (step := runner.launch(scheduler.groups)).report.done[0]:
        pass
    state, rows = generator.rows, torch.tensor(sentence.rows)
    tables = (state.hyp, state.kv_slots, state.kv_len, state.score, state.fin_score, state.fin_hyp, state.fin_len)
    before = [t[rows].clone() for t in tables]
    runner.launch(scheduler.groups)  # launched before the host has looked at `step.done`
    assert all(torch.equal(t[rows], b) for t, b in zip(tables, before))
    assert runner.finish(step) == [sentence]
    runner.release(sentence)
    scheduler.update([sentence])
    expected, _ = hf_generate(hf_model, hf_tokenizer, TEXTS[6], "eng_Latn", "fra_Latn", dict(num_beams=beams, max_length=7))
    assert request.result == expected
    assert generator.rows.num_free_rows() == generator.rows.capacity


def test_steps_of_few_rows_run_their_projections_through_the_fused_kernel(translator, hf_model, hf_tokenizer, monkeypatch):
    """The GPU's few-row decoder step (projections and ReLU in kernels.fused_linear, in half
    precision there), here in float32 through the kernel's reference: still HF's translations."""
    from dragoman import kernels
    from dragoman.engine import model

    calls = []
    fused_linear = kernels.fused_linear
    monkeypatch.setattr(kernels, "fused_linear", lambda *a, **k: calls.append(k.get("relu")) or fused_linear(*a, **k))
    monkeypatch.setattr(model, "FUSED_DTYPES", (torch.float32,))
    options = dict(num_beams=4, max_length=30)
    for text in TEXTS[:3]:
        [ours] = translator.translate([text], "eng_Latn", "deu_Latn", translator.default_options(**options))
        _, expected = hf_generate(hf_model, hf_tokenizer, text, "eng_Latn", "deu_Latn", options)
        assert ours == expected, text
    assert True in calls and False in calls  # fc1 with its ReLU, the others without


def test_the_engine_keeps_the_garbage_collector_off_its_heap_until_teardown(make_translator):
    """A full collection walking torch's and the model's ~200k objects stalled a run by ~80 ms every
    few runs: building the engine freezes what is alive (gc.freeze), and teardown unfreezes and
    collects, so that what only reference cycles held (here a tensor) is freed."""
    import gc
    import weakref

    gc.unfreeze()
    gc.disable()  # no automatic collection before the engine freezes the heap
    try:
        cycle = {"tensor": torch.zeros(4)}
        cycle["self"] = cycle
        tensor = weakref.ref(cycle["tensor"])
        del cycle  # garbage now, but only a collection can find it
        engine = make_translator()
    finally:
        gc.enable()
    assert gc.get_freeze_count() > 0
    gc.collect()
    assert tensor() is not None  # frozen with the rest: no collection walks it
    engine.teardown()
    assert gc.get_freeze_count() == 0 and tensor() is None


@pytest.mark.parametrize("pipelined", [False, True])
@pytest.mark.parametrize("raises_in", ["on_done", "feed"])
def test_an_error_in_the_callers_callback_reaches_it_and_the_sentences_give_their_rows_back(
        translator, monkeypatch, pipelined, raises_in):
    """A document job's on_done stores translations (a full disk raises there) and its feed
    tokenizes texts: an error in either reaches the caller, and the sentences still decoding give
    their rows and cache blocks back, so the next run translates as before."""
    generator, tok = translator.generator, translator.tokenizer
    monkeypatch.setattr(generator, "pipelined", pipelined)
    options = translator.default_options(num_beams=2, max_length=30)

    def make(on_done=None):  # sentences capped at different lengths: they finish at different steps
        return [Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"), options,
                        on_done=on_done, max_length=6 + 4 * i) for i, text in enumerate(TEXTS)]

    expected = [request.result for request in generator.run(make())]
    taken_at_error = []

    def fail(*_):
        taken_at_error.append(generator.num_total_blocks() - generator.num_free_blocks())
        if raises_in == "on_done" or len(taken_at_error) > 1:  # feed: its first call comes before any step
            raise OSError("No space left on device")
        return make()[1:]

    requests = make(fail if raises_in == "on_done" else None)
    with pytest.raises(OSError, match="No space left"):
        if raises_in == "on_done":
            generator.run(requests)
        else:
            generator.run(requests[:1], feed=fail)
    assert taken_at_error[-1] > 0, "nothing was decoding when the callback raised: the test would prove nothing"
    assert generator.rows.num_free_rows() == generator.rows.capacity
    assert generator.num_free_blocks() == generator.num_total_blocks()
    assert [request.result for request in generator.run(make())] == expected
