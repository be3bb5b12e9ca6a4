"""The engine worker (app.server.worker): text requests are served on a thread of their own, so a
document or alternatives running on the other never hold them up (the engine decodes both in its
batches, text first; tests/app/session/test_session.py shows a document going on meanwhile)."""

from dragoman.app.server.pipeline import Text


def test_a_text_request_is_answered_while_a_document_call_runs(server, tmp_path):
    worker = server.server.worker
    source = tmp_path / "notes.txt"
    lines = ["The weather is nice today.", "The cat sleeps on the old chair.", "We walk to the river."]
    source.write_text("".join(f"{line}\n" for line in lines))

    def call_waiting_for_text(pipeline):
        # Served one after the other, the text would wait for this call, which waits for it: no answer.
        text = worker.translate("eng_Latn", "deu_Latn", [Text("Hello world, how are you?")])
        answer = text.result(timeout=120)
        return pipeline.translate_file(source, tmp_path / "out", "eng_Latn", "fra_Latn"), answer

    written, answer = worker.call(call_waiting_for_text).result(timeout=300)
    assert answer and answer[0].strip()
    assert written.name == "notes.fra_Latn.txt" and len(written.read_text().splitlines()) == len(lines)
