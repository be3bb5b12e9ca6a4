from engine.model import FUSED_MAX_ROWS
from engine.translator import Translator


def test_the_warm_up_translates_a_short_and_a_long_sentence_each_alone_and_keeps_nothing(tiny_checkpoint, monkeypatch):
    """One sentence at a time, as typed text runs (a lone sentence's graphs); the longer one of more
    tokens than fused_linear takes rows, so the encoder's projections go through cuBLAS's set-up too."""
    translator = Translator(tiny_checkpoint, device="cpu", dtype="float32")
    generator = translator.generator
    runs, run = [], generator.run
    monkeypatch.setattr(generator, "run", lambda requests: runs.append(requests) or run(requests))
    translator.warm_up(num_beams=4, max_length=20)
    assert [len(requests) for requests in runs] == [1, 1]
    lengths = sorted(len(requests[0].src_ids) for requests in runs)
    assert lengths[0] <= FUSED_MAX_ROWS < lengths[1]
    assert all(r.result and r.options.num_beams == 4 and r.options.max_length == 20 for [r] in runs)
    assert generator.num_free_blocks() == generator.num_total_blocks()
    assert generator.rows.num_free_rows() == generator.rows.capacity
