"""bench.checkpoint's tokenizer is as large as NLLB's and, as a real one, every piece shows text:
document marks, numbers and URLs can be written, and few tokens show nothing."""

import pytest

from bench.__main__ import VOCAB
from bench.checkpoint import SCRIPTS, write_tokenizer
from dragoman.engine.tokenizer import NllbTokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> NllbTokenizer:
    folder = tmp_path_factory.mktemp("tokenizer")
    write_tokenizer(folder / "sentencepiece.bpe.model")
    return NllbTokenizer.from_dir(folder)


def test_it_has_nllbs_layout_and_size(tokenizer):
    assert tokenizer.vocab_size + 2 == VOCAB  # the embedding's two spare rows
    assert tokenizer.lang_id("eng_Latn") == 256_000 + 1 + 46  # the published ids


def test_every_piece_shows_text(tokenizer):
    first_code = tokenizer.lang_id("ace_Arab")
    silent = [i for i in range(4, first_code) if not tokenizer.decode([i]).strip()]
    assert silent == []


@pytest.mark.parametrize("text", [
    "Costs $5.99 at http://www.perl.org/ (see <x1>bold</x1> & <x2/>).",
    "我们明天去北京。", "ไปโรงเรียน", "नमस्ते दुनिया", "مرحبا بالعالم", "שלום עולם", "Привет, мир!",
    "안녕하세요", "Γειά σου", "こんにちは、カタカナ",
])
def test_text_of_every_script_comes_back_whole(tokenizer, text):
    ids = tokenizer.encode_source(text, "eng_Latn")
    assert tokenizer.unk_id not in ids
    assert tokenizer.decode(ids) == text


def test_the_scripts_are_those_documents_hold():
    assert {"latin", "cyrillic", "arabic", "han", "thai", "devanagari"} <= set(SCRIPTS)
