"""The engine worker (app.server.worker): a text request that arrives while a document decodes is
answered before the document is done (the session's TypedTextFirst)."""

from dragoman.app.server.pipeline import Text


def test_a_text_request_goes_before_a_document(server, tmp_path):
    worker = server.server.worker
    source = tmp_path / "notes.txt"
    source.write_text("The weather is nice today.\nThe cat sleeps on the old chair.\nWe walk to the river.\n")

    def document_with_text_arriving(pipeline):
        text = worker.translate("eng_Latn", "deu_Latn", [Text("Hello world, how are you?")])  # queued as it starts
        written = pipeline.translate_file(source, tmp_path / "out", "eng_Latn", "fra_Latn")
        return written, text.done() and text.result()

    written, answer = worker.call(document_with_text_arriving).result()
    assert answer and answer[0].strip()  # answered while the document was still being translated
    assert written.name == "notes.fra_Latn.txt" and len(written.read_text().splitlines()) == 3
