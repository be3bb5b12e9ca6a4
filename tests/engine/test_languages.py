import unicodedata

import pytest
from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

from dragoman import resources
from dragoman.engine.languages import (
    ISO_639_1,
    LANGUAGE_CODES,
    LANGUAGES,
    Language,
    UnknownLanguageError,
    get_language,
    resolve_language,
)


def test_codes_are_nllb_codes_in_token_id_order():
    assert LANGUAGE_CODES == tuple(FAIRSEQ_LANGUAGE_CODES)
    assert resources.path("languages.json").is_file()


@pytest.mark.parametrize("language", LANGUAGES, ids=LANGUAGE_CODES)
def test_every_language_is_described(language: Language):
    assert language.script == language.code.split("_")[1]
    for name in (language.name, language.native):
        assert name and name == name.strip()
        assert unicodedata.normalize("NFC", name) == name


def test_varieties_of_one_language_have_distinct_names():
    assert len({language.name for language in LANGUAGES}) == len(LANGUAGES)
    assert get_language("ace_Arab").name == "Acehnese (Arabic script)"
    assert get_language("zho_Hans").name == "Chinese (Simplified)"
    assert get_language("zho_Hant").name == "Chinese (Traditional)"


@pytest.mark.parametrize(
    ("code", "name", "native"),
    [
        ("fra_Latn", "French", "Français"),
        ("deu_Latn", "German", "Deutsch"),
        ("rus_Cyrl", "Russian", "Русский"),
        ("arb_Arab", "Modern Standard Arabic", "العربية"),
        ("jpn_Jpan", "Japanese", "日本語"),
    ],
)
def test_get_language(code, name, native):
    assert get_language(code) == Language(code, name, native, code[4:])


def test_iso_639_1_codes_map_to_nllb_codes():
    assert set(ISO_639_1.values()) <= set(LANGUAGE_CODES)
    assert ISO_639_1["fr"] == "fra_Latn"
    assert ISO_639_1["zh"] == "zho_Hans"


def test_resolve_language_returns_exact_codes():
    assert [resolve_language(code) for code in LANGUAGE_CODES] == list(LANGUAGE_CODES)


def test_unknown_language_message_names_the_code_and_suggests():
    with pytest.raises(UnknownLanguageError) as error:
        resolve_language("fra_latn")
    assert str(error.value) == "unknown language 'fra_latn'; did you mean fra_Latn?"
    assert isinstance(error.value, ValueError)
    assert error.value.code == "fra_latn"


@pytest.mark.parametrize(
    ("text", "first_suggestions"),
    [
        ("fra_latn", ("fra_Latn",)),  # case
        ("FRA_LATN", ("fra_Latn",)),
        ("eng_Latin", ("eng_Latn",)),  # 3-letter language part
        ("zho", ("zho_Hans", "zho_Hant")),
        ("fr", ("fra_Latn",)),  # ISO 639-1
        ("EN", ("eng_Latn",)),
        ("pt-BR", ("por_Latn",)),
        ("zh_CN", ("zho_Hans",)),
        ("french", ("fra_Latn",)),  # English name
        ("Malay", ("zsm_Latn",)),
        ("chinese", ("zho_Hans", "zho_Hant")),
        ("arabic", ("arb_Arab",)),
        ("Deutsch", ("deu_Latn",)),  # native name
        ("русский", ("rus_Cyrl",)),
        ("中文", ("zho_Hans", "zho_Hant")),
        ("Frnech", ("fra_Latn",)),  # spelling
        ("Deutsh", ("deu_Latn",)),
    ],
)
def test_suggestions(text, first_suggestions):
    with pytest.raises(UnknownLanguageError) as error:
        get_language(text)
    assert error.value.suggestions[: len(first_suggestions)] == first_suggestions
    assert set(error.value.suggestions) <= set(LANGUAGE_CODES)
    assert f"did you mean {first_suggestions[0]}" in str(error.value)


def test_no_suggestion_for_nonsense():
    with pytest.raises(UnknownLanguageError, match=r"^unknown language 'qq'$"):
        resolve_language("qq")
