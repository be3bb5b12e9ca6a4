"""The linear-time matcher of adapter module patterns against Python's `re`, and what it refuses."""

import random
import re

import pytest

from dragoman.engine.linear_regex import MAX_PATTERN_LENGTH, LinearPattern, PatternError

ATOMS = ["a", "b", ".", r"\.", "[ab]", "[^a]", "[a-c_]", r"\d", r"\w", r"\W", r"\s", "(a|b)", "(a|ab)", "(?:ab)",
         "^", "$", r"\b", r"\B", r"\A", r"\Z", "(?P<n>a)", "()"]
REPEATS = ["", "", "*", "+", "?", "{2}", "{1,3}", "*?", "+?", "{0,2}", "{2,}"]


def random_patterns(count, seed):
    rng = random.Random(seed)
    for _ in range(count):
        pattern = "".join(rng.choice(ATOMS) + rng.choice(REPEATS) for _ in range(rng.randint(1, 5)))
        if rng.random() < 0.3:
            pattern = f"({pattern}){rng.choice(REPEATS)}"
        if rng.random() < 0.2:
            pattern += "|" + rng.choice(ATOMS)
        try:
            re.compile(pattern)
        except re.error:
            continue
        yield pattern


def test_random_patterns_match_as_re_does():
    rng = random.Random(7)
    checked = 0
    for pattern in random_patterns(3000, seed=1):
        compiled = LinearPattern(pattern)
        for _ in range(8):
            name = "".join(rng.choice("ab._1 c") for _ in range(rng.randint(0, 9)))
            assert compiled.fullmatch(name) == (re.fullmatch(pattern, name) is not None), (pattern, name)
            assert compiled.match(name) == (re.match(pattern, name) is not None), (pattern, name)
            checked += 1
    assert checked > 10_000


def test_a_pattern_that_backtracks_for_hours_is_answered_at_once():
    # re.fullmatch takes on the order of 2**40 steps here.
    assert not LinearPattern(r"(a+)+$").match("a" * 40 + "!")
    assert not LinearPattern(r"([a-z_.0-9]+)+X").fullmatch("model.decoder.layers.1.encoder_attn.q_proj")


@pytest.mark.parametrize(
    "pattern, reason",
    [
        (r"(?=fc1).*", "uses lookarounds"),
        (r"(?<!de)coder.*", "uses lookarounds"),
        (r"(fc)\1", "uses backreferences"),
        (r"(a)?(?(1)b|c)", "uses conditional groups"),
        (r"(?>fc)1", "uses atomic groups"),
        (r"fc1++", "uses possessive repeats"),
        (r"(?i)FC1", "sets flags"),
        (r"(?s:.)", "sets flags"),
        (r"fc{1,100000}", "repeats more than"),
        (r"(fc1|fc2){1000}", "is too large"),
        ("a" * (MAX_PATTERN_LENGTH + 1), f"is longer than {MAX_PATTERN_LENGTH} characters"),
        ("fc1(", "is not a valid regular expression"),
    ],
)
def test_what_an_automaton_cannot_run_is_refused(pattern, reason):
    with pytest.raises(PatternError, match=re.escape(reason)):
        LinearPattern(pattern)


def test_verbose_patterns_are_read_as_re_reads_them():
    assert LinearPattern(r"(?x) model \. encoder  # a comment").fullmatch("model.encoder")
