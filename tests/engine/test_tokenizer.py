"""engine.tokenizer against transformers' NllbTokenizer (the oracle) on the tiny checkpoint."""

import json
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm
from nllb_checkpoint import training_sentences

from dragoman.engine.languages import LANGUAGE_CODES, UnknownLanguageError
from dragoman.engine.tokenizer import SENTENCEPIECE_FILE, NllbTokenizer, TokenizerError, _grapheme_clusters

SOURCE_LANGUAGES = ["eng_Latn", "fra_Latn", "zho_Hans", "ace_Arab", "zul_Latn"]

TEXTS = [
    # empty and whitespace
    "", " ", "   ", "\t", "\n", "\r\n",
    "  leading spaces", "trailing spaces   ", "multiple   inner \t spaces", "tabs\tand\nnew\r\nlines",
    "A\n\n\nB", "nbsp\u00a0here", "ideographic\u3000space", "zero\u200bwidth\u200cnon\u200djoiners",
    # scripts
    "The cat reads a book.", "Le chat lit un livre très vieux, n'est-ce pas ?",
    "Die Straße über dem Fluss ist schön.", "Кошка читает книгу, а собака спит.",
    "Η γάτα διαβάζει ένα βιβλίο.", "القطة تقرأ كتابا في البيت.", "बिल्ली किताब पढ़ती है।",
    "我的朋友在城市看书。", "猫は本を読みます。コーヒーをください。", "แมวอ่านหนังสือที่บ้าน",
    "貓在學校讀書", "Mixed English, русский, ελληνικά, العربية, हिन्दी, 中文, ไทย.",
    # unknown characters, digits, punctuation
    "😀 emoji 🎉🎉 unknown", "👍🏽 skin tone, 🇫🇷 flag", "龘靐齉 rare CJK", "ꙮ ☃ ♞ rare symbols",
    "1234567890", "3,14 + 2.71 = 5.85% of 1 000 000", "«quotes» „German“ “curly” 'single'",
    "(parens) [brackets] {braces} <angle>", "...!!!???---", "don't can't it's",
    # NFKC: full width, ligatures, circled, squared, composed and decomposed accents
    "ＦＵＬＬ ｗｉｄｔｈ ＡＢＣ １２３", "ﬁne ﬂow ligatures", "① ② ③ ™ ㎏ ½", "café vs cafe\u0301",
    # Hugging Face's normalizer differs from sentencepiece's on these (see CharacterMap)
    "Ａ\u0300 full-width with accent", "ｶﾞｷﾞ half-width katakana", "\u00a0\u0e33", "Vie\u0323\u0302t Nam",
    "e\u0301\u0301\u0301", "soft\u00adhyphen", "control\x00\x07\x1bchars", "▁literal▁▁metaspace",
    # special tokens written in the text
    "a </s> b", "<s>start", "eng_Latn inside", "a<pad>b<unk>c", "x <mask> y", "x\t<mask>", "＜ｍａｓｋ＞",
    "fra_Latneng_Latn", "xxx_Yeng_Latn", "abc_Defeng_Latn</s>", "<x1>eng_Latn</x1> <s/s> eng_latn Eng_Latn",
]


def long_texts() -> list[str]:
    sentences = training_sentences(200, seed=7)
    return [" ".join(sentences), "".join(sentences), "word " * 2000, "字" * 5000]


def random_texts(count: int, seed: int) -> list[str]:
    """Strings drawn from the training text's characters plus spaces, marks, compatibility
    characters, unknown characters and special tokens: where tokenizers tend to disagree."""
    rng = random.Random(seed)
    characters = sorted(set("".join(training_sentences(300, seed=seed))))
    characters += list(" \t\n\r\u00a0\u3000\u200b\u200d\u0301\u0323\u0e33\u094dＡｆ①ﬁ㎏ｶﾞ😀🏽龘\x00▁")
    specials = ["</s>", "<unk>", "<mask>", "eng_Latn", " <mask> "]
    texts = []
    for _ in range(count):
        text = "".join(rng.choice(characters) for _ in range(rng.randint(0, 40)))
        if rng.random() < 0.2:
            position = rng.randint(0, len(text))
            text = text[:position] + rng.choice(specials) + text[position:]
        texts.append(text)
    return texts


@pytest.fixture(scope="module")
def tokenizer(tiny_checkpoint) -> NllbTokenizer:
    return NllbTokenizer.from_dir(tiny_checkpoint)


def hf_encode(hf_tokenizer, text: str, src_lang: str) -> list[int]:
    previous = hf_tokenizer.src_lang
    hf_tokenizer.src_lang = src_lang
    try:
        return hf_tokenizer(text).input_ids
    finally:
        hf_tokenizer.src_lang = previous


def hf_decode(hf_tokenizer, ids: list[int]) -> str:
    return hf_tokenizer.decode(ids, skip_special_tokens=True)


def test_id_layout_is_nllbs(tokenizer, hf_tokenizer, tiny_checkpoint):
    pieces = spm.SentencePieceProcessor(model_file=str(tiny_checkpoint / SENTENCEPIECE_FILE)).get_piece_size()
    # the fixture's tokenizer has the published layout: codes right after the pieces, <mask> last
    assert hf_tokenizer.convert_tokens_to_ids("eng_Latn") == pieces + 1 + 46
    assert hf_tokenizer.convert_ids_to_tokens(pieces + 1) == "ace_Arab"
    assert hf_tokenizer.mask_token_id == len(hf_tokenizer) - 1 == pieces + 1 + 202
    # and ours is the same
    assert tokenizer.vocab_size == len(hf_tokenizer)
    assert [tokenizer.lang_id(code) for code in LANGUAGE_CODES] == hf_tokenizer.convert_tokens_to_ids(
        list(LANGUAGE_CODES)
    )
    specials = (tokenizer.bos_id, tokenizer.pad_id, tokenizer.eos_id, tokenizer.unk_id)
    hf_specials = hf_tokenizer.convert_tokens_to_ids(["<s>", "<pad>", "</s>", "<unk>"])
    assert specials == (0, 1, 2, 3) == tuple(hf_specials)
    # the model's embedding has two spare rows, as published
    config = json.loads((tiny_checkpoint / "config.json").read_text())
    assert config["vocab_size"] == tokenizer.vocab_size + 2


@pytest.mark.parametrize("src_lang", SOURCE_LANGUAGES)
@pytest.mark.parametrize("text", TEXTS)
def test_encode_source_matches_transformers(tokenizer, hf_tokenizer, text, src_lang):
    assert tokenizer.encode_source(text, src_lang) == hf_encode(hf_tokenizer, text, src_lang)


def test_encode_long_texts_matches_transformers(tokenizer, hf_tokenizer):
    for text in long_texts():
        assert tokenizer.encode_source(text, "deu_Latn") == hf_encode(hf_tokenizer, text, "deu_Latn")


def test_encode_many_texts_matches_transformers(tokenizer, hf_tokenizer):
    texts = training_sentences(500, seed=11) + random_texts(2000, seed=12)
    ours = tokenizer.encode_source_batch(texts, "rus_Cyrl")
    mismatches = [text for text, ids in zip(texts, ours) if ids != hf_encode(hf_tokenizer, text, "rus_Cyrl")]
    assert mismatches == []


def test_a_pickled_tokenizer_is_the_same_tokenizer(tokenizer):
    """A document's process gets the engine's tokenizer pickled (its sentencepiece model and
    character map): every text gives the same ids, and every id the same text."""
    again = pickle.loads(pickle.dumps(tokenizer))
    assert again is not tokenizer
    for text in TEXTS + random_texts(200, seed=11):
        assert again.encode_source(text, "eng_Latn") == tokenizer.encode_source(text, "eng_Latn"), text
    ids = list(range(tokenizer.vocab_size + 2))
    assert again.decode(ids) == tokenizer.decode(ids)


def test_plain_text_shortcut_normalizes_as_the_cluster_walk(tokenizer):
    """Text whose every character stays as it is skips the walk over grapheme clusters
    (CharacterMap._all_plain); whatever the mix of characters, the result is the walk's."""
    character_map = tokenizer._character_map
    texts = TEXTS + training_sentences(300, seed=3) + random_texts(3000, seed=4)
    walked = ["".join(map(character_map._normalize_cluster, _grapheme_clusters(text))) for text in texts]
    assert [character_map.normalize(text) for text in texts] == walked
    assert {"a", "e", " ", "."} <= character_map._plain and not {"\u0301", "\uff21", "\t"} & character_map._plain


def test_encode_source_batch(tokenizer):
    batch = tokenizer.encode_source_batch(TEXTS, "fra_Latn")
    assert batch == [tokenizer.encode_source(text, "fra_Latn") for text in TEXTS]


@pytest.mark.parametrize("tgt_lang", SOURCE_LANGUAGES)
def test_decoder_prefix_is_eos_then_target_language(tokenizer, hf_tokenizer, tgt_lang):
    expected = [hf_tokenizer.eos_token_id, hf_tokenizer.convert_tokens_to_ids(tgt_lang)]
    assert tokenizer.decoder_prefix(tgt_lang) == expected


def test_decode_matches_transformers_on_encoded_texts(tokenizer, hf_tokenizer):
    texts = TEXTS + long_texts() + training_sentences(300, seed=13) + random_texts(1000, seed=14)
    for text in texts:
        ids = hf_encode(hf_tokenizer, text, "hin_Deva")
        assert tokenizer.decode(ids) == hf_decode(hf_tokenizer, ids), text


def test_decode_drops_specials_codes_mask_and_spare_ids(tokenizer, hf_tokenizer):
    word = hf_encode(hf_tokenizer, "Katze Hund", "deu_Latn")[1:-1]
    eng, mask, spare = tokenizer.lang_id("eng_Latn"), tokenizer.vocab_size - 1, tokenizer.vocab_size
    sequences = [
        [],
        [2, eng, *word, 2],  # a decoder output: </s> tgt_lang pieces </s>
        [0, 1, 2, 3],
        [3, *word, 3, *word],  # <unk> between pieces
        [*word, mask, eng, spare, spare + 1, *word],
        [tokenizer.unk_id + 1, *word],  # the first piece
        word[1:],  # starting inside a word
    ]
    for ids in sequences:
        assert tokenizer.decode(ids) == hf_decode(hf_tokenizer, ids), ids


@pytest.mark.parametrize("spare", [0, 2, -100])
def test_silent_ids_are_those_whose_decoding_is_blank(tokenizer, spare):
    """As `decode` says one id at a time, with spare embedding rows past the vocabulary, or an
    embedding smaller than it: specials, codes, <mask>, spare rows and pieces of spaces only."""
    size = tokenizer.vocab_size + spare
    silent = tokenizer.silent_ids(size)
    assert silent == {i for i in range(size) if not tokenizer.decode([i]).strip()}
    assert {0, 1, 2, 3} <= silent and tokenizer.unk_id + 1 not in silent


def test_decode_matches_transformers_on_random_ids(tokenizer, hf_tokenizer):
    rng = random.Random(15)
    for _ in range(1000):
        ids = [rng.randrange(tokenizer.vocab_size + 2) for _ in range(rng.randint(0, 30))]
        assert tokenizer.decode(ids) == hf_decode(hf_tokenizer, ids), ids


def test_unknown_language_suggests_codes(tokenizer):
    with pytest.raises(UnknownLanguageError, match="did you mean fra_Latn"):
        tokenizer.lang_id("fra_latn")
    with pytest.raises(UnknownLanguageError, match="did you mean fra_Latn"):
        tokenizer.encode_source("Bonjour", "french")
    with pytest.raises(UnknownLanguageError, match="did you mean deu_Latn"):
        tokenizer.decoder_prefix("de")


def test_missing_sentencepiece_model(tmp_path):
    with pytest.raises(TokenizerError, match=SENTENCEPIECE_FILE) as error:
        NllbTokenizer.from_dir(tmp_path)
    assert str(tmp_path) in str(error.value)


@pytest.mark.parametrize("corrupt", [b"", b"not a sentencepiece model", "half"])
def test_corrupt_sentencepiece_model(tmp_path, tiny_checkpoint, corrupt):
    model = (tiny_checkpoint / SENTENCEPIECE_FILE).read_bytes()
    (tmp_path / SENTENCEPIECE_FILE).write_bytes(model[: len(model) // 2] if corrupt == "half" else corrupt)
    with pytest.raises(TokenizerError, match=SENTENCEPIECE_FILE):
        NllbTokenizer.from_dir(tmp_path)


def test_a_tokenizer_read_ahead_is_taken_up_once_and_only_while_its_file_is_unchanged(tmp_path, tiny_checkpoint):
    """`read_tokenizer_ahead` (a start reads the tokenizer while torch is imported): `from_dir` takes
    what it read, the same tokenizer as reading it then; a file changed meanwhile is read anew, and
    a broken one is refused in the same words."""
    import os
    import shutil

    from dragoman.engine.tokenizer import read_tokenizer_ahead

    model = tmp_path / SENTENCEPIECE_FILE
    shutil.copy(tiny_checkpoint / SENTENCEPIECE_FILE, model)
    read_tokenizer_ahead(tmp_path)
    ahead = NllbTokenizer.from_dir(tmp_path)
    again = NllbTokenizer.from_dir(tmp_path)  # taken once: read anew
    assert ahead is not again
    text = "The quick brown fox jumps over the lazy dog."
    assert ahead.encode_source(text, "eng_Latn") == again.encode_source(text, "eng_Latn")

    from dragoman.engine import tokenizer

    read_tokenizer_ahead(tmp_path)
    [stale] = tokenizer._ahead
    stat = model.stat()
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # replaced meanwhile
    NllbTokenizer.from_dir(tmp_path)
    assert list(tokenizer._ahead) == [stale]  # not taken: read anew

    model.write_bytes(b"not a sentencepiece model")
    read_tokenizer_ahead(tmp_path)
    with pytest.raises(TokenizerError, match=f"{SENTENCEPIECE_FILE}: not a readable sentencepiece model"):
        NllbTokenizer.from_dir(tmp_path)


def test_sentencepiece_model_of_another_layout(tmp_path):
    """A model whose first pieces are not <unk> <s> </s> would shift every id: refuse it."""
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a cat and a dog"] * 20),
        model_prefix=str(tmp_path / "sentencepiece.bpe"),
        model_type="bpe",
        vocab_size=20,
        hard_vocab_limit=False,
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        minloglevel=2,
    )
    with pytest.raises(TokenizerError, match=r"pieces 0-2"):
        NllbTokenizer.from_dir(tmp_path)


def test_engine_does_not_import_transformers():
    repository = Path(__file__).resolve().parents[2]
    code = "import sys, dragoman.engine.tokenizer, dragoman.engine.languages; sys.exit('transformers' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=repository).returncode == 0
