"""The regular expressions of adapter configs, matched in time linear in the name, never backtracking.

PEFT matches `target_modules`, `exclude_modules`, `layers_pattern`, `modules_to_save` and the keys
of `rank_pattern` and `alpha_pattern` against module names with Python's `re`, which backtracks:
`(a+)+$` against a name of 40 characters runs for hours, and an adapter folder is untrusted input
that the window scans and `dragoman adapters` lists. Refusing risky shapes by inspecting a pattern
catches the textbook cases but not all of them (overlapping alternatives such as `(a|ab)*`, long
runs of `.*`), so patterns are run another way: parsed by the standard library's own parser (a
pattern means here what it means to `re`), then matched as a Thompson automaton, which keeps the
set of states live after each character instead of trying one path after another. A name costs
at most (its length x the pattern's states) steps. Sets met once are cached per pattern (a lazy
DFA): a model's module names share most of their characters, so most steps are a lookup.

Patterns have at most MAX_PATTERN_LENGTH characters and MAX_STATES states once counted repeats
(`{2,50}`) are written out. Lookarounds, backreferences, conditionals, atomic groups, possessive
repeats and flags other than verbose are refused: module patterns need none of them, and they are
what an automaton cannot run. Module names hold no line break, so `$` is the end of the name.
"""

from __future__ import annotations

import functools
import sys

# The parser's modules moved into `re` in Python 3.11 (typeshed knows them by their old names only,
# which mypy reads as the project's Python 3.10 has them).
if sys.version_info >= (3, 11):
    from re import _constants as sre
    from re import _parser as sre_parse
else:
    import sre_constants as sre
    import sre_parse

MAX_PATTERN_LENGTH = 1000
MAX_STATES = 2000
CACHED_STATES = 50_000  # per pattern: the states held by the cache of steps (distinct sets counted once)

_CHAR, _SPLIT, _ASSERT, _MATCH = range(4)
_ALLOWED_FLAGS = sre.SRE_FLAG_UNICODE | sre.SRE_FLAG_VERBOSE
_CATEGORIES = {
    sre.CATEGORY_DIGIT: str.isdecimal,
    sre.CATEGORY_NOT_DIGIT: lambda c: not c.isdecimal(),
    sre.CATEGORY_SPACE: str.isspace,
    sre.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
    sre.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
    sre.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
}
_UNSUPPORTED = {
    "GROUPREF": "backreferences",
    "GROUPREF_EXISTS": "conditional groups",
    "ASSERT": "lookarounds",
    "ASSERT_NOT": "lookarounds",
    "ATOMIC_GROUP": "atomic groups",
    "POSSESSIVE_REPEAT": "possessive repeats",
}


class PatternError(ValueError):
    """A pattern this matcher cannot run; the message says why."""


def _is_word(c: str | None) -> bool:
    return c is not None and (c.isalnum() or c == "_")


class LinearPattern:
    """One pattern, compiled to an automaton: `fullmatch(name)` and `match(name)` as `re`'s, as booleans."""

    def __init__(self, pattern: str):
        if len(pattern) > MAX_PATTERN_LENGTH:
            raise PatternError(f"is longer than {MAX_PATTERN_LENGTH} characters")
        try:
            parsed = sre_parse.parse(pattern)
        except sre.error as e:
            raise PatternError(f"is not a valid regular expression ({e})") from None
        except RecursionError:
            raise PatternError("is nested too deeply") from None
        if parsed.state.flags & ~_ALLOWED_FLAGS:
            raise PatternError("sets flags (such as (?i)): not supported")
        # State i: its kind, its argument (a character test or an assertion) and where it leads.
        self._kind: list[int] = []
        self._arg: list = []
        self._out: list[list[int]] = []
        self._match = self._add(_MATCH)
        self._boundaries = False  # whether an assertion looks at the next character
        try:
            self._start = self._sequence(list(parsed.data), self._match)  # its items (the stubs give it no __iter__)
        except RecursionError:
            raise PatternError("is nested too deeply") from None
        self._steps: dict[tuple, frozenset[int]] = {}
        self._sets: dict[frozenset[int], frozenset[int]] = {}  # each cached set once
        self._cached = 0

    # -- building the automaton, from the end of the pattern backwards ----------------------------

    def _add(self, kind: int, arg=None, out: list[int] | None = None) -> int:
        if len(self._kind) >= MAX_STATES:
            raise PatternError(f"is too large (more than {MAX_STATES} states once its repeats are written out)")
        self._kind.append(kind)
        self._arg.append(arg)
        self._out.append(out or [])
        return len(self._kind) - 1

    def _sequence(self, items: list, after: int) -> int:
        for op, av in reversed(items):
            after = self._node(op, av, after)
        return after

    def _node(self, op, av, after: int) -> int:
        if op is sre.LITERAL:
            return self._add(_CHAR, (sre.LITERAL, av), [after])
        if op is sre.NOT_LITERAL:
            return self._add(_CHAR, (sre.NOT_LITERAL, av), [after])
        if op is sre.ANY:
            return self._add(_CHAR, (sre.ANY, None), [after])
        if op is sre.IN:
            for item_op, item in av:
                if item_op is sre.CATEGORY and item not in _CATEGORIES:
                    raise PatternError(f"uses the character class {item}: not supported")
                if item_op not in (sre.NEGATE, sre.LITERAL, sre.RANGE, sre.CATEGORY):
                    raise PatternError(f"uses {item_op} in a character set: not supported")
            return self._add(_CHAR, (sre.IN, tuple(av)), [after])
        if op is sre.BRANCH:
            return self._add(_SPLIT, None, [self._sequence(list(branch), after) for branch in av[1]])
        if op is sre.SUBPATTERN:
            _, add_flags, del_flags, body = av
            if (add_flags | del_flags) & ~_ALLOWED_FLAGS:
                raise PatternError("sets flags (such as (?i:...)): not supported")
            return self._sequence(list(body), after)
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):  # greedy or lazy: the same set of matches
            low, high, body = av
            body = list(body)
            unbounded = high == sre.MAXREPEAT
            if low > MAX_STATES or not unbounded and high - low > MAX_STATES:
                raise PatternError(f"repeats more than {MAX_STATES} times")
            if unbounded:
                loop = self._add(_SPLIT, None, [after])
                self._out[loop].insert(0, self._sequence(body, loop))
                start = loop
            else:
                start = after
                for _ in range(high - low):  # each optional copy may end the repeat
                    start = self._add(_SPLIT, None, [self._sequence(body, start), after])
            for _ in range(low):
                start = self._sequence(body, start)
            return start
        if op is sre.AT:
            if av in (sre.AT_BOUNDARY, sre.AT_NON_BOUNDARY):
                self._boundaries = True
            elif av not in (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING, sre.AT_END, sre.AT_END_STRING):
                raise PatternError(f"uses the anchor {av}: not supported")
            return self._add(_ASSERT, av, [after])
        what = _UNSUPPORTED.get(str(op), str(op))
        raise PatternError(f"uses {what}: not supported in module patterns")

    # -- running it ------------------------------------------------------------------------------

    def _accepts(self, state: int, c: str) -> bool:
        op, av = self._arg[state]
        if op is sre.LITERAL:
            return ord(c) == av
        if op is sre.NOT_LITERAL:
            return ord(c) != av
        if op is sre.ANY:
            return c != "\n"
        hit, negate = False, False
        for item_op, item in av:
            if item_op is sre.NEGATE:
                negate = True
            elif item_op is sre.LITERAL:
                hit = hit or ord(c) == item
            elif item_op is sre.RANGE:
                hit = hit or item[0] <= ord(c) <= item[1]
            else:
                hit = hit or _CATEGORIES[item](c)
        return hit != negate

    def _holds(self, anchor, before: str | None, after: str | None) -> bool:
        """Whether `anchor` holds between the characters `before` and `after` (None: the name's ends)."""
        if anchor in (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING):
            return before is None
        if anchor in (sre.AT_END, sre.AT_END_STRING):
            return after is None
        boundary = _is_word(before) != _is_word(after)
        if anchor is sre.AT_BOUNDARY:
            return boundary
        return not boundary and not (before is None and after is None)  # as re: \B never matches ""

    def _closure(self, states, before: str | None, after: str | None) -> frozenset[int]:
        """The character tests and the match state reachable from `states` without reading a character."""
        seen, found, stack = set(), [], list(states)
        while stack:
            state = stack.pop()
            if state in seen:
                continue
            seen.add(state)
            kind = self._kind[state]
            if kind == _SPLIT:
                stack.extend(self._out[state])
            elif kind == _ASSERT:
                if self._holds(self._arg[state], before, after):
                    stack.append(self._out[state][0])
            else:
                found.append(state)
        return frozenset(found)

    def _step(self, live: frozenset[int], c: str, after: str | None) -> frozenset[int]:
        key = (live, c, after if self._boundaries else after is None)
        following = self._steps.get(key)
        if following is None:
            moved = [self._out[s][0] for s in live if self._kind[s] == _CHAR and self._accepts(s, c)]
            following = self._closure(moved, c, after)
            if following not in self._sets and self._cached + len(following) <= CACHED_STATES:
                self._sets[following] = following
                self._cached += len(following)
            if following in self._sets:
                following = self._sets[following]
                self._steps[key] = following
        return following

    def _run(self, name: str, whole: bool) -> bool:
        live = self._closure([self._start], None, name[:1] or None)
        for i, c in enumerate(name):
            if not live or not whole and self._match in live:
                break
            live = self._step(live, c, name[i + 1] if i + 1 < len(name) else None)
        return self._match in live

    def fullmatch(self, name: str) -> bool:
        """As `re.fullmatch(pattern, name) is not None`."""
        return self._run(name, whole=True)

    def match(self, name: str) -> bool:
        """As `re.match(pattern, name) is not None`: from the name's start, ending anywhere."""
        return self._run(name, whole=False)


@functools.lru_cache(maxsize=32)
def compile_pattern(pattern: str) -> LinearPattern:
    """The compiled pattern (PatternError if it cannot be run); compiled once per process."""
    return LinearPattern(pattern)
