"""Fixtures of the format tests: deterministic fake translators, and the real engine beside them."""

import pytest

from document_fakes import upper_keeping_tags, upper_losing_tags

@pytest.fixture(params=[upper_keeping_tags, upper_losing_tags], ids=["tags-kept", "tags-lost"])
def fake(request):
    return request.param


@pytest.fixture
def engine_batch(request):
    """`translate_batch` of the real engine on the tests' checkpoint (greedy, 16 tokens): a model
    whose vocabulary cannot spell everything and that keeps no tag it is not forced to."""
    translator = request.getfixturevalue("translator")
    options = translator.default_options(num_beams=1, max_length=16)
    return lambda texts: translator.translate(texts, "eng_Latn", "fra_Latn", options)


@pytest.fixture(params=["stand-in", "engine"])
def translate(request):
    """A document check's translator: a fake that keeps the tags, then the real engine."""
    return upper_keeping_tags if request.param == "stand-in" else request.getfixturevalue("engine_batch")


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """The app's folders (the translation cache) under tmp_path: no test touches the user's."""
    monkeypatch.setenv("DRAGOMAN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"
