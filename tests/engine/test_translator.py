from engine.model import FOLD_SLOTS, FUSED_MAX_ROWS, FoldedSources
from engine.translator import Translator


def test_the_warm_up_translates_a_sentence_of_each_kind_alone_and_keeps_nothing(tiny_checkpoint, monkeypatch):
    """One sentence at a time, as typed text runs (a lone sentence's graphs): a short one, one of
    more tokens than fused_linear takes rows (the encoder's projections go through cuBLAS's set-up
    too), and one folded at each S of FoldedSources (each S has graphs of its own)."""
    translator = Translator(tiny_checkpoint, device="cpu", dtype="float32")
    generator = translator.generator
    runs, run = [], generator.run
    monkeypatch.setattr(generator, "run", lambda requests: runs.append(requests) or run(requests))
    translator.warm_up(num_beams=4, max_length=20)
    assert all(len(requests) == 1 for requests in runs)
    lengths = sorted(len(requests[0].src_ids) for requests in runs)
    assert lengths[0] <= FOLD_SLOTS[0] and lengths[-1] > FUSED_MAX_ROWS
    assert sorted({FoldedSources.slots_for(n) for n in lengths} - {0}) == list(FOLD_SLOTS)  # 0: not folded
    assert all(r.result and r.options.num_beams == 4 and r.options.max_length == 20 for [r] in runs)
    assert generator.num_free_blocks() == generator.num_total_blocks()
    assert generator.rows.num_free_rows() == generator.rows.capacity
