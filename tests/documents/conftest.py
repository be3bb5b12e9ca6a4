"""Deterministic fake translators for the format tests: no engine, no model."""

import pytest

from document_fakes import upper_keeping_tags, upper_losing_tags

@pytest.fixture(params=[upper_keeping_tags, upper_losing_tags], ids=["tags-kept", "tags-lost"])
def fake(request):
    return request.param


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """The app's folders (the translation cache) under tmp_path: no test touches the user's."""
    monkeypatch.setenv("DRAGOMAN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"
