"""Lexically constrained beam search (engine/constraints.py): every constraint appears in what it
gives, and without constraints it is BeamSearch and greedy search step for step, and transformers'
`generate` token for token on the tiny checkpoint in float32."""

import random

import pytest
from reference_search import (
    beam_step,
    constrained_step,
    greedy_step,
    hf_generate,
    model_logits,
    run,
    toy_logits,
)

from dragoman.engine.constraints import MAX_CONSTRAINTS, ConstrainedBeamSearch, Constraints, search_scores
from dragoman.engine.decoding import BeamSearch, DecodingOptions, GreedySearch, OptionsError

EOS, VOCAB = 2, 40
PREFIX = [2, 7]  # `</s>` and a language code
TOY = toy_logits(VOCAB, EOS)

BEAM_OPTIONS = [
    DecodingOptions(num_beams=4, max_length=20),
    DecodingOptions(num_beams=3, max_length=16, length_penalty=0.6, early_stopping=True, min_new_tokens=3),
    DecodingOptions(num_beams=2, max_length=14, length_penalty=1.3, early_stopping="never", min_length=6),
    DecodingOptions(num_beams=3, max_length=15, repetition_penalty=1.4, no_repeat_ngram_size=3),
    DecodingOptions(num_beams=5, max_length=10, forced_eos_id=EOS),
]
GREEDY_OPTIONS = [
    DecodingOptions(num_beams=1, max_length=20),
    DecodingOptions(num_beams=1, max_length=14, repetition_penalty=1.5, min_new_tokens=4),
]


def option_id(options):
    return f"beams{options.num_beams}-max{options.length}"


def appears(part, tokens):
    return any(tokens[i : i + len(part)] == part for i in range(len(tokens) - len(part) + 1))


@pytest.mark.parametrize("options", BEAM_OPTIONS, ids=option_id)
def test_without_constraints_each_step_is_beam_searchs(options):
    for start in ([2, 7], [2, 9, 11], [2, 30]):
        plain, ours = BeamSearch(start, options, EOS), ConstrainedBeamSearch(start, options, EOS, [])
        steps = 0
        while not plain.done:
            beam_step(plain, TOY, EOS)
            constrained_step(ours, TOY, EOS)
            steps += 1
            assert ours.done == plain.done, f"step {steps}"
            assert [f[1] for f in ours.finished] == [f[1] for f in plain.finished]
            assert [f[0] for f in ours.finished] == pytest.approx([f[0] for f in plain.finished], rel=1e-6)
            if not plain.done:
                assert ours.live == plain.live, f"step {steps}"
                assert [b.score for b in ours.beams] == pytest.approx([b.score for b in plain.beams], rel=1e-6)
        assert ours.best() == plain.best()
        assert ours.alternatives(options.num_beams) == plain.alternatives(options.num_beams)


@pytest.mark.parametrize("options", GREEDY_OPTIONS, ids=option_id)
def test_without_constraints_one_beam_is_greedy_search(options):
    for start in ([2, 7], [2, 9, 11], [2, 30]):
        plain = run(GreedySearch(start, options, EOS), greedy_step, TOY, EOS)
        ours = run(ConstrainedBeamSearch(start, options, EOS, []), constrained_step, TOY, EOS)
        assert ours.best() == plain.best()


CASES = {
    "one": [[5, 6]],
    "several": [[5, 6], [9], [11, 12, 13]],
    "overlapping": [[5, 6], [6, 7]],  # may share the 6: "5 6 7"
    "conflicting": [[5, 6], [5, 7]],  # both continue 5
    "repeating tokens": [[8, 8, 9]],  # "8 8 8 9" meets it: the automaton falls back, not to 0
    "periodic": [[8, 9, 8, 9, 8]],
    "prefix of another": [[5, 6], [5, 6, 7]],
    "unlikely tokens": [[39, 38, 37], [36]],
}


@pytest.mark.parametrize("options", BEAM_OPTIONS + GREEDY_OPTIONS, ids=option_id)
@pytest.mark.parametrize("case", CASES)
def test_every_constraint_appears_in_every_hypothesis_it_gives(case, options):
    constraints = CASES[case]
    if options.no_repeat_ngram_size == 3 and case == "periodic":
        with pytest.raises(OptionsError, match=r"constraints \[8, 9, 8, 9, 8\] repeats a 3-gram, which no_repeat"):
            ConstrainedBeamSearch(PREFIX, options, EOS, constraints)
        return
    search = run(ConstrainedBeamSearch(PREFIX, options, EOS, constraints), constrained_step, TOY, EOS)
    assert search.finished, "a hypothesis always finishes"
    for _, tokens in search.finished:
        assert len(tokens) <= options.length
        for constraint in constraints:
            assert appears(constraint, tokens[len(PREFIX) :]), (constraint, tokens)
    assert search.best() == search.finished[0][1]
    if options.forced_eos_id is not None:
        assert all(t[-1] == EOS for _, t in search.finished)


def test_constraints_that_fill_every_position_left_are_met_exactly():
    options = DecodingOptions(num_beams=3, max_length=len(PREFIX) + 5)
    constraints = [[11, 12], [13, 14, 15]]
    search = run(ConstrainedBeamSearch(PREFIX, options, EOS, constraints), constrained_step, TOY, EOS)
    assert sorted(t[len(PREFIX) :] for _, t in search.finished)[0] in ([11, 12, 13, 14, 15], [13, 14, 15, 11, 12])
    for _, tokens in search.finished:
        assert all(appears(c, tokens) for c in constraints)


@pytest.mark.parametrize("num_beams", [1, 3])
def test_a_forced_end_token_leaves_the_constraints_one_position_less(num_beams):
    options = DecodingOptions(num_beams=num_beams, max_length=len(PREFIX) + 6, forced_eos_id=EOS)
    constraints = [[39, 38], [37, 36, 35]]  # tokens the toy model does not favour, which it would put off
    search = run(ConstrainedBeamSearch(PREFIX, options, EOS, constraints), constrained_step, TOY, EOS)
    assert search.finished
    for _, tokens in search.finished:
        assert tokens[-1] == EOS and all(appears(c, tokens) for c in constraints)
    with pytest.raises(OptionsError, match="need up to 5 tokens, but max_length 7 leaves 4 after the decoder prefix"):
        ConstrainedBeamSearch(PREFIX, options.with_changes(max_length=7), EOS, constraints)


def test_a_constraint_the_processors_ban_everywhere_ends_the_search_with_nothing_finished():
    # "5 6" is in the prefix, so no_repeat_ngram_size=2 bans 6 after every 5: [5, 6, 9] cannot be written.
    prefix = [2, 5, 6, 7]
    options = DecodingOptions(num_beams=3, max_length=14, no_repeat_ngram_size=2)
    search = run(ConstrainedBeamSearch(prefix, options, EOS, [[5, 6, 9]]), constrained_step, TOY, EOS)
    assert search.done and search.finished == []
    assert search.best()[: len(prefix)] == prefix and search.alternatives(3) == []


def test_hypotheses_meeting_constraints_keep_beam_places_beside_better_scored_ones():
    options = DecodingOptions(num_beams=4, max_length=20)
    scores = search_scores(TOY([PREFIX]), [PREFIX], options, EOS)
    worst = int(scores[0].argmin())  # the constraint's token is the one the model likes least
    search = ConstrainedBeamSearch(PREFIX, options, EOS, [[worst]])
    constrained_step(search, TOY, EOS)
    banks = sorted(b.bank for b in search.beams)
    assert banks[-1] == 1 and banks[0] == 0, "both banks hold hypotheses"
    run(search, constrained_step, TOY, EOS)
    assert all(worst in t[len(PREFIX) :] for _, t in search.finished)


def test_met_counts_follow_the_longest_start_of_each_constraint_ending_the_output():
    rng = random.Random(5)
    for _ in range(200):
        sequences = [[rng.randint(3, 5) for _ in range(rng.randint(1, 5))] for _ in range(rng.randint(1, 3))]
        constraints = Constraints(sequences, EOS)
        tokens, met = [], constraints.start([])
        for _ in range(30):
            token = rng.randint(3, 6)
            tokens.append(token)
            met = constraints.after(met, token)
            for sequence, m in zip(constraints.sequences, met):
                if appears(list(sequence), tokens):
                    assert m == len(sequence)
                else:
                    longest = max(k for k in range(len(sequence)) if k == 0 or tokens[-k:] == list(sequence[:k]))
                    assert m == longest, (sequence, tokens)


def test_duplicates_and_constraints_inside_others_are_met_with_them():
    constraints = Constraints([[5, 6], [4, 5, 6, 7], [9], [9], [6, 7]], EOS)
    assert constraints.sequences == ((4, 5, 6, 7), (9,))
    assert constraints.total == 5


@pytest.mark.parametrize(
    "constraints, message",
    [
        ([[]], "constraints #1 must be a non-empty sequence of token ids"),
        ([[5], "abc"], "constraints #2 must be a non-empty sequence of token ids"),
        ([[5, -1]], "constraint #1's token must be an integer from 0 to"),
        ([[5, 6.0]], "constraint #1's token must be an integer from 0 to"),
        ([[5, EOS]], "constraints #1 holds </s> (2), which would end the sentence"),
        ([[5]] * (MAX_CONSTRAINTS + 1), f"constraints must be a list of at most {MAX_CONSTRAINTS}"),
        ([[5, 6, 7], [8, 9, 10, 11]], "constraints need up to 7 tokens, but max_length 8 leaves 6 after the decoder"),
    ],
)
def test_bad_constraints_and_ones_that_cannot_fit_are_refused_in_one_line(constraints, message):
    with pytest.raises(OptionsError) as error:
        ConstrainedBeamSearch(PREFIX, DecodingOptions(num_beams=2, max_length=8), EOS, constraints)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_a_token_past_the_vocabulary_is_refused_at_the_first_step():
    search = ConstrainedBeamSearch(PREFIX, DecodingOptions(num_beams=2, max_length=8), EOS, [[VOCAB]])
    with pytest.raises(OptionsError, match=f"constraints hold token {VOCAB}, past the vocabulary of {VOCAB}"):
        constrained_step(search, TOY, EOS)


# -- the tiny checkpoint -----------------------------------------------------------------------------

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Привет, как дела?", "我们明天去北京。", "Ein kurzer Satz"]
HF_OPTIONS = [
    dict(num_beams=1, max_length=30),
    dict(num_beams=4, max_length=30),
    dict(num_beams=3, length_penalty=0.5, early_stopping=True, max_length=24),
    dict(num_beams=4, no_repeat_ngram_size=2, repetition_penalty=1.3, max_length=24),
]


@pytest.mark.parametrize("hf_options", HF_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_without_constraints_it_gives_what_generate_gives(hf_model, hf_tokenizer, hf_options):
    options = DecodingOptions(**hf_options)
    prefix = [EOS, hf_tokenizer.convert_tokens_to_ids("fra_Latn")]
    for text in TEXTS:
        logits_of = model_logits(hf_model, hf_tokenizer, text, "eng_Latn")
        expected = hf_generate(hf_model, hf_tokenizer, text, "eng_Latn", "fra_Latn", **hf_options)[0]
        ours = run(ConstrainedBeamSearch(prefix, options, EOS, []), constrained_step, logits_of, EOS)
        assert ours.best() == expected, text
        if options.num_beams > 1:
            assert run(BeamSearch(prefix, options, EOS), beam_step, logits_of, EOS).best() == expected, text
            n = options.num_beams
            assert ours.alternatives(n) == hf_generate(hf_model, hf_tokenizer, text, "eng_Latn", "fra_Latn",
                                                       num_return_sequences=n, **hf_options), text


@pytest.mark.parametrize("num_beams", [1, 4])
def test_the_tiny_checkpoint_writes_the_words_it_is_told_to(hf_model, hf_tokenizer, num_beams):
    options = DecodingOptions(num_beams=num_beams, max_length=40)
    prefix = [EOS, hf_tokenizer.convert_tokens_to_ids("fra_Latn")]
    words = ["chat", "bonjour le monde"]
    constraints = [hf_tokenizer(w, add_special_tokens=False)["input_ids"] for w in words]
    for text in TEXTS:
        logits_of = model_logits(hf_model, hf_tokenizer, text, "eng_Latn")
        plain = run(ConstrainedBeamSearch(prefix, options, EOS, []), constrained_step, logits_of, EOS).best()
        search = run(ConstrainedBeamSearch(prefix, options, EOS, constraints), constrained_step, logits_of, EOS)
        translation = hf_tokenizer.decode(search.best(), skip_special_tokens=True)
        assert all(w in translation for w in words), (text, translation)
        assert search.best() != plain
