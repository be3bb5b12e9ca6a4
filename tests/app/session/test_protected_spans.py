"""Do-not-translate spans: URLs, e-mail addresses, placeholders, numbers with units and a user's
terms, found with their offsets, and what only looks like them left alone."""

import pytest

from dragoman.app.session.protected_spans import MAX_URL_CHARS, ProtectedTerms, find_protected_spans


def found(text, terms=None):
    return [(text[s.start : s.end], s.kind) for s in find_protected_spans(text, terms)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Go to https://example.com.", ["https://example.com"]),
        ("See (https://en.wikipedia.org/wiki/Foo_(bar)), then", ["https://en.wikipedia.org/wiki/Foo_(bar)"]),
        ("Open https://example.com/?q=1&x=2#top, or not!", ["https://example.com/?q=1&x=2#top"]),
        ('He said "http://a.org/x" twice', ["http://a.org/x"]),
        ("“https://a.org/x”?", ["https://a.org/x"]),
        ("Visit www.example.org; it is free", ["www.example.org"]),
        ("ftp://files.example.com/a.tar.gz and file:///home/me/a.txt:", ["ftp://files.example.com/a.tar.gz", "file:///home/me/a.txt"]),
        ("访问https://example.com获取。", ["https://example.com"]),
        ("<https://example.com/a>", ["https://example.com/a"]),
        ("mailto:me@example.com.", ["mailto:me@example.com"]),
        ("https:// is a scheme, www. a prefix, and www.x too", []),
        ("https://user@host.example/path", ["https://user@host.example/path"]),
    ],
)
def test_urls_end_where_the_sentence_takes_over(text, expected):
    assert found(text) == [(e, "url") for e in expected]


def test_a_url_longer_than_the_limit_is_cut_at_it():
    url = "https://example.com/" + "a" * (2 * MAX_URL_CHARS)
    assert [len(t) for t, _ in found(url)] == [MAX_URL_CHARS]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Write to john.doe+list@mail.example.co.uk.", ["john.doe+list@mail.example.co.uk"]),
        ("Ask émilie@exemple.fr or 王@例子.中国", ["émilie@exemple.fr"]),  # not in Han: the sentence goes on in it
        ("@user, a@b, x@y.c, a..b@c.com, .a@b.com", []),
        ("a" * 65 + "@example.com", []),
    ],
)
def test_email_addresses(text, expected):
    assert [t for t, kind in found(text) if kind == "email"] == expected


def test_an_email_in_a_script_without_spaces():
    assert found("请发邮件到wang@example.cn谢谢") == [("wang@example.cn", "email")]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello {name}, {0} and {} and {0:.2f} and {user.name!r}", ["{name}", "{0}", "{}", "{0:.2f}", "{user.name!r}"]),
        ("Hi ${name} and {{ user.name }} and {{count}}", ["${name}", "{{ user.name }}", "{{count}}"]),
        ("%s has %d files (%5.1f%%), %1$s, %(count)d, %-5.2f, %ld, %lu, %x", ["%s", "%d", "%5.1f", "%%", "%1$s", "%(count)d", "%-5.2f", "%ld", "%lu", "%x"]),
        ("Qt: %1 of %2, done %1.", ["%1", "%2", "%1"]),
        ("Replace with $1 or $12 then", ["$1", "$12"]),
        ("{ not one }, {a{b}, {{}}, %age, % of, %y%", ["{b}"]),
    ],
)
def test_placeholders(text, expected):
    assert [t for t, kind in found(text) if kind == "placeholder"] == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("50% of 3,5 GHz at −4 °C", ["50%", "3,5 GHz", "−4 °C"]),
        ("-4°C, 100 % sure, 10 km/h, 5kg, 2 min", ["-4°C", "100 %", "10 km/h", "5kg", "2 min"]),
        ("It costs $5.99 or 20 € or € 20 or £3", ["$5.99", "20 €", "€ 20", "£3"]),
        ("1 000 m, 1\u202f000\u00a0km, 1,000,000 USD, 4.7 GB", ["1 000 m", "1\u202f000\u00a0km", "1,000,000 USD", "4.7 GB"]),
        ("5 sisters, the 5th, in 3d, A4 paper, 12 items, 2024", []),
    ],
)
def test_numbers_with_units_as_written(text, expected):
    assert [t for t, kind in found(text) if kind == "number"] == expected


def test_percent_after_a_number_is_its_unit_not_printf():
    assert found("50% done, 50%s and %s") == [("50%", "number"), ("%s", "placeholder"), ("%s", "placeholder")]


def test_offsets_are_the_texts_own():
    text = "Prix : 20\u00a0€ — voir https://a.fr/x."
    spans = find_protected_spans(text)
    assert [(s.start, s.end) for s in spans] == [(7, 11), (19, 33)]


def test_a_users_terms_are_kept_as_the_sentence_writes_them():
    terms = ProtectedTerms(["Dragoman", "Visual  Studio Code", "東京"])
    text = "DRAGOMAN runs in visual studio code, see https://dragoman.example/Dragoman; 東京で"
    assert found(text, terms) == [("DRAGOMAN", "term"), ("visual studio code", "term"),
                                  ("https://dragoman.example/Dragoman", "url"), ("東京", "term")]
    assert found("dragomans", terms) == []


@pytest.mark.parametrize("terms, message", [([""], "do-not-translate term #1 is empty"),
                                            (["ok", "x" * 101], "do-not-translate term #2 is longer than 100"),
                                            (["a"] * 10_001, "the do-not-translate list holds more than 10,000")])
def test_bad_term_lists_are_refused_in_one_line(terms, message):
    with pytest.raises(ValueError, match=message):
        ProtectedTerms(terms)


@pytest.mark.parametrize("text", ["{" * 5000, "%" * 5001, "a@" * 3000, "http://" * 1000, "1 " * 5000 + "kg",
                                  "$" * 5000, "1." * 5000, "(" * 3000 + "https://a.b/" + ")" * 3000])
def test_long_runs_of_what_starts_spans(text):
    spans = find_protected_spans(text)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))
    assert all(0 <= s.start < s.end <= len(text) for s in spans)
