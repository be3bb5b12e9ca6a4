"""The device-side constrained search (engine/constrained_search.py) against the per-sentence
reference (engine/constraints.py's ConstrainedBeamSearch), step by step: same hypotheses in the
same rows, same scores, met counts and finished hypotheses, same results. One batch holds
sentences of different constraint counts and max_lengths, and beside them, on the same rows'
state, plain sentences that batched_search steps as it always does."""

import pytest
import torch
from reference_search import beam_step as reference_beam_step
from reference_search import greedy_step as reference_greedy_step
from reference_search import toy_logits

from dragoman import kernels
from dragoman.engine.batched_search import beam_step, greedy_step
from dragoman.engine.constrained_search import ConstraintTables, constrained_step
from dragoman.engine.constraints import ConstrainedBeamSearch, Constraints, search_scores, search_width
from dragoman.engine.decoding import BLOCKED, BeamSearch, DecodingOptions, GreedySearch
from dragoman.engine.rows import DecoderRows
from dragoman.kernels.constrained_advance import met_after

EOS, VOCAB, T = 2, 40, 40
TOY = toy_logits(VOCAB, EOS)
# (prefix, constraints, max_length less than the options'): counts, overlaps, conflicts, repeats
SENTENCES = [
    ([2, 7], [[5, 6]], 0),
    ([2, 9, 11], [[5, 6], [6, 7], [9, 30]], 2),  # [6, 7] may share 5 6's 6
    ([2, 8], [[8, 8, 9]], 1),  # falls back on its repeated token, not to 0
    ([2, 7], [[11, 12, 13], [11, 14], [36]], 0),  # two continue 11
    ([2, 30, 5], [[5, 6, 7, 8], [39, 38]], 3),  # the prefix meets one token already
    # chains: segments in this order, anything between them
    ([2, 7], [[[20], [21]]], 0),  # an opening and a closing tag
    ([2, 9], [[[20, 5], [21, 5], [22]], [5, 6]], 1),  # tags sharing a token, beside a plain constraint
    ([2, 7], [[[20], [20, 21], [21]]], 2),  # a segment starting as the one before, ending as the next begins
    ([2, 7], [[[20], [], [21]], [[22], [], [23]]], 0),  # tag pairs around some words: gaps
    ([2, 9], [[[20, 5], [], [21, 5], [22]], [5]], 1),  # a gap between tags sharing a token, beside a plain one
    ([2, 7], [[[20], {4, 11}, [21]]], 0),  # a gap that 4 and 11 (tokens that show nothing) do not fill
]
PLAIN = [[2, 7], [2, 13, 14]]  # sentences without constraints, in a group of their own

OPTIONS = [
    DecodingOptions(num_beams=4, max_length=20),
    DecodingOptions(num_beams=3, max_length=18, length_penalty=0.6, early_stopping=True, min_new_tokens=3),
    DecodingOptions(num_beams=2, max_length=18, length_penalty=1.3, early_stopping="never", min_length=6),
    DecodingOptions(num_beams=3, max_length=18, repetition_penalty=1.4, no_repeat_ngram_size=3),  # host histories
    DecodingOptions(num_beams=3, max_length=16, forced_eos_id=EOS),
    DecodingOptions(num_beams=1, max_length=20),
    DecodingOptions(num_beams=1, max_length=18, min_new_tokens=4, repetition_penalty=1.3),
]


class Batch:
    """Sentences on the rows of one DecoderRows, each in a group of the sentences of its width."""

    def __init__(self, options):
        self.options = options
        # A forced `</s>` reads max_length: sentences of their own max_length search apart (Request.search_options).
        self.own = [options.with_changes(max_length=options.length - less * (options.forced_eos_id is None),
                                         max_new_tokens=None) for _, _, less in SENTENCES]
        self.refs = [ConstrainedBeamSearch(p, own, EOS, c) for (p, c, _), own in zip(SENTENCES, self.own)]
        self.plain = [(BeamSearch if options.num_beams > 1 else GreedySearch)(p, options, EOS) for p in PLAIN]
        widths = [search_width(options.num_beams, r.constraints.total) for r in self.refs]
        self.state = DecoderRows(sum(widths) + len(PLAIN) * options.num_beams, T, 4, torch.device("cpu"))
        self.rows, first = [], 0
        for width in widths + [options.num_beams] * len(PLAIN):
            self.rows.append(torch.arange(first, first + width))
            first += width
        s = self.state
        for i, prefix in enumerate([p for p, _, _ in SENTENCES] + PLAIN):
            rows = self.rows[i]
            s.hyp[rows, : len(prefix)] = torch.tensor(prefix)
            s.kv_len[rows] = len(prefix)
            s.limit[rows] = self.own[i].length if i < len(SENTENCES) else options.length
            if i < len(SENTENCES):  # as admission sets a constrained sentence up
                s.score[rows] = torch.tensor([0.0] + [float("-inf")] * (len(rows) - 1))
                met = self.refs[i].constraints.start(prefix)
                s.met[rows, : len(met)] = torch.tensor(met, dtype=torch.int32)
            else:
                s.score[rows] = torch.tensor([0.0] + [BLOCKED] * (len(rows) - 1))
        self.results = {}

    def logits(self, rows):
        """The toy model's logits of each row's hypothesis."""
        return TOY([self.state.hyp[r, : self.state.kv_len[r]].tolist() for r in rows.reshape(-1).tolist()])

    def report(self, done, rows, sentences):
        report = kernels.StepReport(torch.empty(len(sentences), dtype=torch.bool),
                                    torch.empty(len(sentences), T, dtype=torch.int64),
                                    torch.empty(len(sentences), dtype=torch.int32),
                                    torch.empty(len(sentences), dtype=torch.float32))
        kernels.step_report(done, rows, self.state.tensors, report, False)
        for i, s in enumerate(sentences):
            if done[i]:
                self.results[s] = report.best[i, : report.lengths[i]].tolist()

    def step(self, active):
        """One step of every active sentence: the device searches, then the references."""
        constrained = [s for s in active if s < len(SENTENCES)]
        by_width = {}
        for s in constrained:
            by_width.setdefault(len(self.rows[s]), []).append(s)
        for width, group in by_width.items():
            rows = torch.stack([self.rows[s] for s in group])  # (S, W)
            tables = ConstraintTables.build([self.refs[s].constraints for s in group], rows.device)
            lengths = [self.refs[s].cur_len for s in group]
            done = constrained_step(self.state, rows, self.logits(rows), self.options, EOS, T, lengths, tables)
            self.report(done, rows, group)
            for s, d in zip(group, done.tolist()):
                ref = self.refs[s]
                ref.advance(search_scores(TOY(ref.live), ref.live, ref.options, EOS))
                assert d == ref.done, f"sentence {s}"
        plain = [s for s in active if s >= len(SENTENCES)]
        if plain:
            rows = torch.stack([self.rows[s] for s in plain])
            lengths = [self.state.kv_len[r[0]].item() for r in rows]
            step = beam_step if self.options.num_beams > 1 else greedy_step
            done = step(self.state, rows, self.logits(rows), self.options, EOS, T, lengths)
            self.report(done, rows, plain)
            for s, d in zip(plain, done.tolist()):
                ref = self.plain[s - len(SENTENCES)]
                (reference_beam_step if self.options.num_beams > 1 else reference_greedy_step)(ref, TOY, EOS)
                assert d == ref.done
        for s in active:
            self.state.kv_len[self.rows[s]] += 1  # the next decoder step feeds the new token

    def check(self, s, step):
        """Sentence s's rows hold what its reference holds."""
        ref, rows, state = self.refs[s], self.rows[s], self.state
        where = f"sentence {s}, step {step}"
        n = len(ref.beams)
        assert state.hyp[rows[:n], : ref.cur_len].tolist() == ref.live, where
        assert state.score[rows[:n]].tolist() == pytest.approx([b.score for b in ref.beams], rel=1e-5, abs=1e-5), where
        assert (state.score[rows[n:]] == float("-inf")).all(), where
        C = len(ref.constraints.sequences)
        assert [tuple(m) for m in state.met[rows[:n], :C].tolist()] == [b.met for b in ref.beams], where
        fin = state.fin_score[rows]
        assert fin[fin > float("-inf")].tolist() == pytest.approx([f[0] for f in ref.finished], rel=1e-5), where
        for i, (_, tokens) in enumerate(ref.finished):
            assert state.fin_hyp[rows[i], : state.fin_len[rows[i]]].tolist() == tokens, where


@pytest.mark.parametrize("options", OPTIONS, ids=[f"o{i}-beams{o.num_beams}" for i, o in enumerate(OPTIONS)])
def test_constrained_step_follows_the_reference_search(options):
    batch = Batch(options)
    everyone = list(range(len(SENTENCES) + len(PLAIN)))
    searches = batch.refs + batch.plain
    for step in range(T):
        active = [s for s in everyone if not searches[s].done]
        if not active:
            break
        batch.step(active)
        for s in active:
            if s < len(SENTENCES) and not batch.refs[s].done:
                batch.check(s, step)
            elif s >= len(SENTENCES) and not searches[s].done:
                ref = searches[s]
                assert batch.state.hyp[batch.rows[s][: len(ref.live)], : len(ref.live[0])].tolist() == ref.live
    assert all(s.done for s in searches), "every sentence ends by max_length"
    assert [batch.results[s] for s in everyone] == [r.best() for r in searches]
    for s, (_, constraints, _) in enumerate(SENTENCES):
        assert all(in_order(batch.results[s], c if isinstance(c[0], (list, set)) else [c]) for c in constraints), s
    widths = {len(batch.rows[s]) for s in range(len(SENTENCES))}
    assert options.num_beams > 1 or len(widths) > 1, "greedy sentences of several widths"


def in_order(tokens, segments):
    """Whether the segments appear in `tokens` one after another (each where it first ends)."""
    own = {t for s in segments if isinstance(s, list) for t in s}
    at = 0
    for segment in segments:
        if isinstance(segment, set) or not segment:  # a gap: a token of none of the chain's, nor the set's
            ends = [i + 1 for i in range(at, len(tokens)) if tokens[i] not in own | set(segment)]
        else:
            ends = [i + len(segment) for i in range(at, len(tokens)) if tokens[i : i + len(segment)] == segment]
        if not ends:
            return False
        at = ends[0]
    return True


def test_a_chain_meets_its_segments_in_order_only():
    chain = Constraints([[[20, 5], [21, 5], [22]]], EOS)
    assert chain.lengths == (5,) and chain.sequences == ((20, 5, 21, 5, 22),)
    assert chain.start([20, 5, 9, 21]) == (3,)  # within the second segment
    assert chain.start([20, 5, 9, 21, 7]) == (2,)  # back to the second segment's start, never below
    assert chain.start([20, 5, 20, 5, 21, 5, 22]) == (5,)
    assert chain.start([21, 5, 22, 20, 5]) == (2,)  # the later segments before the first count for nothing
    assert chain.needed((3,)) == 2 and chain.needed((2,)) == 3
    assert chain.appear_in([20, 5, 7, 21, 5, 22]) and not chain.appear_in([21, 5, 20, 5, 22])
    # beside a plain constraint: the chain's finished segments are kept, and the plain one's met count
    both = Constraints([[[20], [21]], [5, 6, 7]], EOS)
    assert both.needed((1, 2)) == 1 + 3 - 2  # 21, then 7: the plain one continued
    assert both.needed((1, 0)) == 1 + 3
    assert Constraints([[[5, 6]], [5, 6]], EOS).lengths == (2, 2), "a chain is never dropped as held by another"
    # a gap: one token at least of none of the chain's
    pair = Constraints([[[20], [], [21]]], EOS)
    assert pair.lengths == (3,) and pair.sequences == ((20, -1, 21),)
    assert pair.start([20, 21]) == (1,) and pair.start([20, 20]) == (1,)  # the chain's own tokens are no gap
    assert pair.start([20, 9]) == (2,) and pair.start([20, 9, 9]) == (2,) and pair.start([20, 9, 21]) == (3,)
    assert pair.needed((1,)) == 2 and pair.needed((0,)) == 3 and pair.advancing((1,)) == set()
    assert pair.appear_in([20, 9, 21]) and not pair.appear_in([20, 21, 21])
    shown = Constraints([[[20], {9}, [21]]], EOS)  # 9 shows nothing: it fills no gap
    assert shown.start([20, 9]) == (1,) and shown.start([20, 9, 8]) == (2,)
    assert 9 not in shown.tokens and shown.silent == {9}  # the gap's set is no constraint token
    assert shown.appear_in([20, 8, 21]) and not shown.appear_in([20, 9, 21])


def test_tables_hold_each_constraints_automaton():
    constraints = [Constraints([[8, 8, 9]], EOS), Constraints([[5, 6], [6, 7], [9]], EOS),
                   Constraints([[[6], [5, 6]]], EOS)]
    tables = ConstraintTables.build(constraints, torch.device("cpu"))
    assert tables.widths == (4, 4, 4, 4)  # 3 constraints, 3 tokens, 4 distinct, 1 silent run: rounded up (table_width)
    assert tables.lengths.tolist() == [[3, 0, 0, 0], [2, 2, 1, 0], [3, 0, 0, 0]]
    assert tables.tokens.tolist() == [[8, 9, 8, 8], [5, 6, 7, 9], [5, 6, 5, 5]]  # padded with the first
    assert tables.resets[2, 0].tolist() == [0, 1, 1, 0]  # the second segment starts at 1
    gap = ConstraintTables.build([Constraints([[[6], [], [5, 6]]], EOS)], torch.device("cpu"))
    assert gap.sequences[0, 0].tolist() == [6, -1, 5, 6]
    assert gap.resets[0, 0].tolist() == [0, 2, 2, 2] and gap.floors[0, 0].tolist() == [0, 1, 2, 2]
    assert gap.moves[0, 0, 1, :2].tolist() == [1, 1]  # at the gap the chain's own tokens stay
    for c, moves, tokens in zip(constraints, tables.moves, tables.tokens.tolist()):
        for i, n in enumerate(c.lengths):
            for m in range(n):
                own = sorted(c.tokens)
                assert moves[i, m, : len(own)].tolist() == [
                    c.after(tuple(m if j == i else 0 for j in range(len(c.lengths))), t)[i] for t in own]


def test_a_vocabulary_sized_gap_set_keeps_the_tables_small_and_moves_as_the_reference():
    """A gap's set of tokens that show nothing is as large as a vocabulary that cannot spell its
    ids (a quarter of a million): the tables hold its runs, not its tokens."""
    vocab = 256_206
    silent = frozenset(range(4, 200_000)) | frozenset(range(200_002, vocab))  # all but a few ids show nothing
    chain = Constraints([[[200_000], silent, [200_001]], [5]], EOS)
    tables = ConstraintTables.build([chain], torch.device("cpu"))
    C, L, J, R = tables.widths
    assert (J, R) == (4, 4) and tables.silent[0].tolist() == [[4, 199_999], [200_002, vocab - 1], [1, 0], [1, 0]]
    tokens = [3, 4, 5, 150_000, 200_000, 200_001, vocab - 1]
    for m in range(chain.lengths[0]):
        met = torch.tensor([[[m] + [0] * (C - 1)]]).expand(1, len(tokens), C)  # (S, X, C)
        moved = met_after(tables, met, torch.tensor([tokens]))[0, :, 0].tolist()
        assert moved == [chain.after((m, 0), t)[0] for t in tokens], m
    assert chain.start([200_000, 150_000]) == (1, 0) and chain.start([200_000, 3]) == (2, 0)


def test_tables_kept_when_sentences_leave_and_join_are_the_tables_built_anew():
    """The step runner keeps a group's tables as its sentences change: a selection of those that
    stay, joined with those of the new ones, padded to the widest."""
    constraints = [Constraints(c, EOS) for _, c, _ in SENTENCES]
    cpu = torch.device("cpu")
    kept = ConstraintTables.build(constraints[:3], cpu).select(torch.tensor([0, 2]))
    tables = ConstraintTables.joined(kept, ConstraintTables.build(constraints[3:], cpu))
    anew = ConstraintTables.build([constraints[i] for i in (0, 2, *range(3, len(constraints)))], cpu)
    for field in ("lengths", "sequences", "tokens", "moves", "resets", "floors", "silent"):
        assert torch.equal(getattr(tables, field), getattr(anew, field)), field


def test_a_search_the_processors_leave_nothing_to_finish_gives_the_hypothesis_it_has():
    # "5 6" is in the prefix, so no_repeat_ngram_size=2 bans 6 after every 5: [5, 6, 9] cannot be written.
    prefix, options = [2, 5, 6, 7], DecodingOptions(num_beams=3, max_length=14, no_repeat_ngram_size=2)
    ref = ConstrainedBeamSearch(prefix, options, EOS, [[5, 6, 9]])
    state, rows = DecoderRows(3, T, 4, torch.device("cpu")), torch.arange(3)[None]
    state.hyp[rows, :4], state.kv_len[rows], state.limit[rows] = torch.tensor(prefix), 4, options.length
    state.score[rows] = torch.tensor([0.0, float("-inf"), float("-inf")])
    state.met[rows, :1] = torch.tensor(ref.constraints.start(prefix), dtype=torch.int32)
    tables = ConstraintTables.build([ref.constraints], rows.device)
    while not ref.done:
        histories = [state.hyp[r, : state.kv_len[r]].tolist() for r in range(3)]
        done = constrained_step(state, rows, TOY(histories), options, EOS, T, [ref.cur_len], tables)
        ref.advance(search_scores(TOY(ref.live), ref.live, options, EOS))
        assert done.item() == ref.done
        if not ref.done:
            assert state.hyp[rows[0, : len(ref.beams)], : ref.cur_len].tolist() == ref.live
            none = [float("-inf")] * (3 - len(ref.beams))
            assert state.score[rows[0]].tolist() == pytest.approx([b.score for b in ref.beams] + none)
        state.kv_len[rows] += not ref.done
    assert ref.finished == [] and (state.fin_score[rows] == float("-inf")).all()
    report = kernels.StepReport(torch.empty(1, dtype=torch.bool), torch.empty(1, T, dtype=torch.int64),
                                torch.empty(1, dtype=torch.int32), torch.empty(1, dtype=torch.float32))
    kernels.step_report(done, rows, state.tensors, report, False)
    assert report.best[0, : report.lengths[0]].tolist() == ref.best()


def test_a_padding_sentence_with_no_number_in_its_logits_keeps_the_padding_row_at_length_0():
    """A graphed step pads its constrained group with sentences of the padding row, whose logits may
    be NaN (it attends over slots nobody wrote): it must not walk the row's length below 0, where
    its next step would write before its first slot."""
    options = DecodingOptions(num_beams=2, max_length=14)
    state = DecoderRows(4, T, 4, torch.device("cpu"))
    padding = torch.full((1, 2), state.padding_row)  # (S, W): one sentence of the padding row
    tables = ConstraintTables.build([Constraints([[5, 6]], EOS)], padding.device)
    for _ in range(3):
        nan = torch.full((2, VOCAB), float("nan"))
        constrained_step(state, padding, nan, options, EOS, T, [0], tables)
        assert state.kv_len[state.padding_row].item() == 0


# -- in the engine, on the tiny checkpoint ------------------------------------------------------------

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Привет, как дела?", "我们明天去北京。",
         "Ein kurzer Satz", "Bonjour, comment allez-vous aujourd'hui ?"]
WORDS = [["chat"], [], ["bonjour le monde", "chat", "rouge"], [], ["maison", "le maison"]]  # overlapping, in another


@pytest.mark.parametrize("pipelined", [False, True], ids=["steps finished at once", "pipelined as on the GPU"])
@pytest.mark.parametrize("hf_options", [dict(num_beams=4, max_length=40), dict(num_beams=1, max_length=40),
                                        dict(num_beams=3, length_penalty=0.6, early_stopping=True, max_length=32),
                                        dict(num_beams=2, repetition_penalty=1.3, max_length=32)],
                         ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_a_batch_mixing_constrained_and_plain_sentences(translator, hf_model, hf_tokenizer, hf_options, pipelined,
                                                        monkeypatch):
    """Plain sentences give generate's tokens beside constrained ones, which give the reference's."""
    from reference_search import constrained_step as reference_constrained_step
    from reference_search import hf_generate, model_logits, run

    from dragoman.engine.generator import Request

    monkeypatch.setattr(translator.generator, "pipelined", pipelined)
    tok, options = translator.tokenizer, DecodingOptions(**hf_options)
    prefix = tok.decoder_prefix("fra_Latn")
    constraints = [[tok.encode_target_start(w) for w in words] for words in WORDS]
    requests = [Request(tok.encode_source(text, "eng_Latn"), prefix, options, constraints=c or None)
                for text, c in zip(TEXTS, constraints)]
    translator.generator.run(requests)
    for text, c, request in zip(TEXTS, constraints, requests):
        if not c:
            assert request.result == hf_generate(hf_model, hf_tokenizer, text, "eng_Latn", "fra_Latn", **hf_options)[0]
            continue
        logits_of = model_logits(hf_model, hf_tokenizer, text, "eng_Latn")
        ref = run(ConstrainedBeamSearch(prefix, options, EOS, c), reference_constrained_step, logits_of, EOS)
        assert request.result == ref.best(), text
        assert all(any(request.result[i : i + len(x)] == x for i in range(len(request.result))) for x in c)


def test_constraints_that_cannot_fit_are_refused_in_one_line(translator):
    from dragoman.engine.decoding import OptionsError
    from dragoman.engine.generator import Request

    tok = translator.tokenizer
    words = tok.encode_target_start("bonjour le monde, comment allez-vous")
    request = Request(tok.encode_source("Hello", "eng_Latn"), tok.decoder_prefix("fra_Latn"),
                      DecodingOptions(num_beams=2, max_length=len(words) + 1), constraints=[words])
    with pytest.raises(OptionsError, match=f"constraints need up to {len(words)} tokens, but max_length") as error:
        translator.generator.run([request])
    assert "\n" not in str(error.value)


def test_constrained_sentences_joining_as_others_leave_end_as_they_do_together(make_translator, translator):
    """With rows for few sentences at a time, constrained sentences join the group's search as others
    leave it (each at its own max_length; the tables of those that stay are kept): each ends as in
    one batch of all."""
    from dragoman.engine.generator import Request

    small = make_translator(max_rows=6)
    tok = translator.tokenizer
    options = DecodingOptions(num_beams=2, max_length=32)
    texts = TEXTS * 2
    words = [["chat"], ["le monde", "rouge"], ["maison"], ["bonjour"], ["chat noir", "le"]] * 2

    def results(engine):
        requests = [Request(tok.encode_source(t, "eng_Latn"), tok.decoder_prefix("fra_Latn"), options,
                            constraints=[tok.encode_target_start(w) for w in own], max_length=14 + 2 * i)
                    for i, (t, own) in enumerate(zip(texts, words))]
        engine.generator.run(requests)
        return [r.result for r in requests]

    assert results(small) == results(translator)


@pytest.mark.parametrize("num_beams", [4, 1])
def test_a_constrained_group_searching_in_the_steps_graph_ends_as_it_does_eagerly(translator, num_beams, monkeypatch):
    """Alone in a step, a constrained group's search is part of the step's graph, reading its tables
    from buffers padded to the graph's sentences and rounded shapes (on the CPU the graph path runs
    eagerly, padded as on the GPU): the same results as the eager search."""
    from dragoman.engine.generator import Generator, Request
    from dragoman.engine.step_runner import StepRunner

    graphed = Generator.build(translator.generator.model, max_rows=32, graphs=True)
    searched_in_graph = []
    original = StepRunner._graph_tables
    monkeypatch.setattr(StepRunner, "_graph_tables",
                        lambda self, *args: searched_in_graph.append(1) or original(self, *args))
    tok = translator.tokenizer
    options = DecodingOptions(num_beams=num_beams, max_length=32)
    # For greedy, constraints of 7 tokens or more: each sentence's search 8 wide, so that they share one.
    words = [["bonjour le monde"], ["le monde", "rouge"], ["bonjour", "maison"]]

    def results(generator):
        requests = [Request(tok.encode_source(t, "eng_Latn"), tok.decoder_prefix("fra_Latn"), options,
                            constraints=[tok.encode_target_start(w) for w in own], max_length=20 + 3 * i)
                    for i, (t, own) in enumerate(zip(TEXTS, words))]
        generator.run(requests)
        return [r.result for r in requests]

    assert results(graphed) == results(translator.generator)
    assert searched_in_graph
