"""NLLB's tokenizer: sentencepiece pieces in fairseq's id layout, as Hugging Face's NllbTokenizer.

Ids: <s>=0, <pad>=1, </s>=2, <unk>=3; sentencepiece piece i (i >= 3) is i + 1; then the 202
language codes in LANGUAGE_CODES order; then <mask>. A source is `[src_lang] pieces </s>`; the
decoder starts with `</s> tgt_lang`.

Hugging Face (transformers 5) does not run sentencepiece: it rebuilds the pipeline in the
`tokenizers` library, which differs from sentencepiece in its normalizer, its whitespace handling
and its special tokens. We follow Hugging Face, since NLLB checkpoints are used and evaluated
through it: we normalize as it does, then let sentencepiece (with its own normalizer switched
off) split the text into pieces — the two agree on pieces and on fusing unknown characters.
"""

from __future__ import annotations

import functools
import re
import struct
import threading
import unicodedata
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path

import sentencepiece as spm

from dragoman.engine.config import file_stamp
from dragoman.engine.languages import LANGUAGE_CODES, get_language

SENTENCEPIECE_FILE = "sentencepiece.bpe.model"
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # ids 0..3
MASK = "<mask>"
SPACE_PIECE = "▁"

# Hugging Face squeezes runs of spaces after the character map, but keeps a leading or trailing one.
_SPACE_RUNS = re.compile(" {2,}")
# <mask> is matched in the normalized text and swallows the whitespace before it (lstrip).
_MASK_IN_TEXT = re.compile(r"\s*" + re.escape(MASK))
# What a special token written in the text looks like: a fairseq special or a language code. Each
# text found is looked up; an alternation of the ~200 specials themselves took half of tokenizing a
# text with a "<" (a document's tagged sentences) or a "_".
_SPECIAL_SHAPE = re.compile(r"<(?:s|/s|pad|unk)>|[a-z]{3}_[A-Z][a-z]{3}")


class TokenizerError(Exception):
    """The sentencepiece model is missing, unreadable, or not laid out like NLLB's."""


class NllbTokenizer:
    bos_id = 0
    pad_id = 1
    eos_id = 2
    unk_id = 3

    def __init__(self, sentencepiece: spm.SentencePieceProcessor, character_map: CharacterMap):
        """`sentencepiece` must not normalize (see from_dir); `character_map` is its model's."""
        self._sp = sentencepiece
        self._sentencepiece_unk = sentencepiece.unk_id()
        self._character_map = character_map
        pieces = sentencepiece.get_piece_size()
        self._first_language_id = pieces + 1
        self._language_ids = {code: pieces + 1 + i for i, code in enumerate(LANGUAGE_CODES)}
        self.mask_id = pieces + 1 + len(LANGUAGE_CODES)
        [self._space_id] = self._piece_ids([sentencepiece.piece_to_id(SPACE_PIECE)])
        # Hugging Face finds special tokens written in the text (added vocabulary) and keeps them
        # whole, so "a </s> b" holds an end-of-sequence id (`_split_specials`).
        self._special_ids = {**dict(zip(FAIRSEQ_SPECIALS, range(4))), **self._language_ids}
        assert all(_SPECIAL_SHAPE.fullmatch(special) for special in self._special_ids)

    def __reduce__(self):
        """Pickled as its sentencepiece model and character map: a document's process tokenizes
        with the very tokenizer the engine has (app.session.document_process)."""
        return _tokenizer_of, (self._sp.serialized_model_proto(), self._character_map.precompiled)

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> NllbTokenizer:
        """The folder's tokenizer: the one `read_tokenizer_ahead` read, if its file has not changed since."""
        key = file_stamp(Path(model_dir) / SENTENCEPIECE_FILE)
        with _ahead_lock:
            ahead = _ahead.pop(key, None) if key is not None else None
        return ahead.result() if ahead is not None else cls._read(model_dir)

    @classmethod
    def _read(cls, model_dir: str | Path) -> NllbTokenizer:
        path = Path(model_dir) / SENTENCEPIECE_FILE
        if not path.is_file():
            raise TokenizerError(f"{path}: no such file; an NLLB model folder has {SENTENCEPIECE_FILE}")
        try:
            # We normalize as Hugging Face does, so sentencepiece must not normalize again.
            model, precompiled_character_map = _split_sentencepiece_model(path.read_bytes())
            sentencepiece = spm.SentencePieceProcessor(model_proto=model)
            character_map = CharacterMap(precompiled_character_map)
        except (OSError, RuntimeError, ValueError, IndexError, struct.error) as error:
            raise TokenizerError(f"{path}: not a readable sentencepiece model ({error})") from error
        layout = [sentencepiece.id_to_piece(i) for i in range(min(3, sentencepiece.get_piece_size()))]
        if layout != ["<unk>", "<s>", "</s>"]:
            raise TokenizerError(f"{path}: pieces 0-2 are {layout}, NLLB's are ['<unk>', '<s>', '</s>']")
        return cls(sentencepiece, character_map)

    @property
    def vocab_size(self) -> int:
        """Specials, pieces, language codes and <mask> (the model's embedding has 2 spare rows more)."""
        return self.mask_id + 1

    def lang_id(self, code: str) -> int:
        if code not in self._language_ids:
            get_language(code)  # raises UnknownLanguageError with suggestions
        return self._language_ids[code]

    def encode_source(self, text: str, src_lang: str) -> list[int]:
        return [self.lang_id(src_lang), *self._text_ids(text), self.eos_id]

    def encode_source_batch(self, texts: Iterable[str], src_lang: str) -> list[list[int]]:
        return [self.encode_source(text, src_lang) for text in texts]

    def encode_source_pieces(self, text: str, src_lang: str, max_positions: int) -> list[list[int]]:
        """The text's source ids in pieces a model of `max_positions` reads: a text longer than that
        is cut in halves between words (between characters where it has no spaces), again until
        each fits; their translations are joined with a space."""
        source = self.encode_source(text, src_lang)
        if len(source) <= max_positions:
            return [source]
        words = text.split()
        if len(words) > 1:
            halves = " ".join(words[: len(words) // 2]), " ".join(words[len(words) // 2 :])
        else:
            halves = text[: len(text) // 2], text[len(text) // 2 :]
        return [piece for half in halves for piece in self.encode_source_pieces(half, src_lang, max_positions)]

    def decoder_prefix(self, tgt_lang: str) -> list[int]:
        return [self.eos_id, self.lang_id(tgt_lang)]

    def encode_target_start(self, text: str) -> list[int]:
        """The pieces of the start of a translation, as Hugging Face's tokenizer gives them without
        special tokens: what follows `decoder_prefix` to force that start."""
        return self._text_ids(text)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids`, as Hugging Face's decode(ids, skip_special_tokens=True): specials
        (<unk> included), language codes, <mask> and ids past the vocabulary are dropped."""
        ids = [i - 1 for i in map(int, ids) if self.unk_id < i < self._first_language_id]
        pieces = self._sp.id_to_piece(ids) if ids else []  # one call for all: several times faster than a call per id
        # Every "▁" is a space; only the first piece's leading one goes (Metaspace decoder).
        return "".join(pieces).replace(SPACE_PIECE, " ").removeprefix(" ")

    def silent_ids(self, vocab_size: int) -> frozenset[int]:
        """The ids below `vocab_size` whose `decode` is blank (no text, or spaces only): specials,
        language codes, spare rows and pieces of spaces; one call to sentencepiece for all."""
        first, end = self.unk_id + 1, min(self._first_language_id, vocab_size)
        pieces = self._sp.id_to_piece(list(range(first - 1, end - 1))) if end > first else []
        shown = {first + n for n, piece in enumerate(pieces) if piece.replace(SPACE_PIECE, " ").strip()}
        return frozenset(i for i in range(vocab_size) if i not in shown)

    def _piece_ids(self, sentencepiece_ids: list[int]) -> list[int]:
        """Our ids of sentencepiece's: one past them (fairseq's layout), its unknown piece as <unk>.
        One comprehension for a sentence's pieces, with no method call per piece: those calls were a
        measurable share of a sentence's tokenizing."""
        unk, sentencepiece_unk = self.unk_id, self._sentencepiece_unk
        return [unk if i == sentencepiece_unk else i + 1 for i in sentencepiece_ids]

    def _text_ids(self, text: str) -> list[int]:
        ids = []
        # Odd chunks are the special tokens found in the text. Each holds "<" or "_", which most
        # text has not: then there is nothing to search for.
        chunks = self._split_specials(text) if "<" in text or "_" in text else [text]
        for index, chunk in enumerate(chunks):
            if index % 2:
                ids.append(self._special_ids[chunk])
                continue
            normalized = _SPACE_RUNS.sub(" ", self._character_map.normalize(chunk))
            for part_index, part in enumerate(_MASK_IN_TEXT.split(normalized)):
                if part_index:
                    ids.append(self.mask_id)
                ids += self._normalized_text_ids(part)
        return ids

    def _split_specials(self, text: str) -> list[str]:
        """`text` cut around the special tokens written in it, as re.split with a group would cut it
        at an alternation of them all: text, special, text, ..., text. A special is matched at the
        first place one starts, as Hugging Face's matcher does; at any one place only one can
        (no special is another's start), so where the shape matched something else, the search goes
        on from the next character."""
        chunks, start, at = [], 0, 0
        while (found := _SPECIAL_SHAPE.search(text, at)) is not None:
            if found.group() in self._special_ids:
                chunks += [text[start : found.start()], found.group()]
                start = at = found.end()
            else:
                at = found.start() + 1
        chunks.append(text[start:])
        return chunks

    def _normalized_text_ids(self, normalized: str) -> list[int]:
        # Each part gets its own leading "▁" (Metaspace, prepend_scheme="always"), as
        # sentencepiece's dummy prefix does.
        ids = self._piece_ids(self._sp.encode(normalized))
        # sentencepiece drops a trailing space; Hugging Face's Metaspace keeps it as a lone "▁".
        if normalized.endswith(" "):
            ids.append(self._space_id)
        return ids


def _tokenizer_of(model: bytes, precompiled: bytes) -> NllbTokenizer:
    """The NllbTokenizer of a pickle (`NllbTokenizer.__reduce__`)."""
    return NllbTokenizer(spm.SentencePieceProcessor(model_proto=model), CharacterMap(precompiled))


class CharacterMap:
    """sentencepiece's precompiled character map (NFKC and more), applied as Hugging Face's
    `tokenizers` applies it, which is not how sentencepiece does: per grapheme cluster, a cluster
    under 6 UTF-8 bytes is replaced whole by the rule for its *shortest* matching prefix (so in
    "Ａ" + combining grave the accent is lost), longer clusters character by character (so the
    rules that compose several characters, e.g. half-width "ｶ" + "ﾞ" -> "ガ", never apply there)."""

    def __init__(self, precompiled: bytes):
        if not precompiled:
            raise ValueError("the model has no precompiled character map; NLLB's has one")
        self.precompiled = precompiled
        # <trie size: u32 LE><darts-clone double-array trie: u32 LE units><replacements, NUL-separated>
        trie_size = int.from_bytes(precompiled[:4], "little")
        self._trie = struct.unpack(f"<{trie_size // 4}I", precompiled[4 : 4 + trie_size])
        self._replacements = precompiled[4 + trie_size :]
        self._normalize_cluster = functools.lru_cache(maxsize=1 << 16)(self._normalize_cluster_uncached)
        self._plain: set[str] = set()  # characters found to stay as they are (`_is_plain`)

    def normalize(self, text: str) -> str:
        # Most text has no character that a rule or a cluster could change, and stays as it is:
        # checked per distinct character, where walking the clusters of every character kept the GPU
        # waiting for a document's batch.
        if self._all_plain(text):
            return text
        return "".join(map(self._normalize_cluster, _grapheme_clusters(text)))

    def _all_plain(self, text: str) -> bool:
        chars = set(text)
        if chars <= self._plain:
            return True
        for char in chars - self._plain:
            if not self._is_plain(char):
                return False
            self._plain.add(char)
        return True

    def _is_plain(self, char: str) -> bool:
        """Whether `char` stays as it is wherever it stands among plain characters: it has no rule
        of its own and makes a cluster with neither neighbour (not a control character, a mark or
        joiner, or a prepended character), so it is a cluster alone, which only its own rule could
        change. (Rules of several characters, such as "a" + combining grave, need a mark.)"""
        return not (_is_control(char) or _continues_cluster(char) or char in _PREPEND) and self._replacement(char) is None

    def _normalize_cluster_uncached(self, cluster: str) -> str:
        if len(cluster.encode()) < 6 and (replacement := self._replacement(cluster)) is not None:
            return replacement
        return "".join(self._replacement(char) or char for char in cluster)

    def _replacement(self, text: str) -> str | None:
        """The replacement for the shortest prefix of `text` that has a rule (darts-clone
        commonPrefixSearch, first result), or None."""
        node = self._unit_offset(self._trie[0])
        for byte in text.encode():
            if byte == 0:
                break
            node ^= byte
            unit = self._trie[node]
            if unit & ((1 << 31) | 0xFF) != byte:  # label
                return None
            node ^= self._unit_offset(unit)
            if unit >> 8 & 1:  # has a leaf: a rule ends here
                start = self._trie[node] & ((1 << 31) - 1)
                return self._replacements[start : self._replacements.index(0, start)].decode()
        return None

    @staticmethod
    def _unit_offset(unit: int) -> int:
        return (unit >> 10) << ((unit & (1 << 9)) >> 6)


# Grapheme clusters (Unicode UAX #29) as far as they matter to CharacterMap: only marks, joiners
# and prepended characters make clusters under 6 bytes; Hangul syllables, flags and emoji
# sequences are longer and get the per-character treatment either way, so they are left out.
_EXTEND = set("\u200c\u200d\uff9e\uff9f")  # ZWNJ, ZWJ, half-width (semi-)voiced sound marks
_EXTEND |= {chr(c) for c in range(0x1F3FB, 0x1F400)}  # emoji skin tones
_EXTEND |= {chr(c) for c in range(0xE0020, 0xE0080)}  # tag characters
_SPACING_MARK = set("\u0e33\u0eb3")  # Thai and Lao AM; more below by category
_NOT_SPACING_MARK = set(
    "\u102b\u102c\u1038\u1062\u1063\u1064\u1067\u1068\u1069\u106a\u106b\u106c\u106d\u1083\u1087\u1088"
    "\u1089\u108a\u108b\u108c\u108f\u109a\u109b\u109c\u1a61\u1a63\u1a64\uaa7b\uaa7d\U00011720\U00011721"
)
_PREPEND = set("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2\u0d4e")


def _grapheme_clusters(text: str) -> Iterator[str]:
    start = 0
    for i in range(1, len(text)):
        if _is_cluster_boundary(text[i - 1], text[i]):
            yield text[start:i]
            start = i
    if text:
        yield text[start:]


def _is_cluster_boundary(before: str, after: str) -> bool:
    if before == "\r" and after == "\n":
        return False
    if _is_control(before) or _is_control(after):
        return True
    return not (_continues_cluster(after) or before in _PREPEND)


def _continues_cluster(char: str) -> bool:
    """Grapheme_Cluster_Break Extend, ZWJ or SpacingMark."""
    if char in _EXTEND or char in _SPACING_MARK:
        return True
    category = unicodedata.category(char)
    return category in ("Mn", "Me") or category == "Mc" and char not in _NOT_SPACING_MARK


def _is_control(char: str) -> bool:
    category = unicodedata.category(char)
    if category == "Cf":
        return char not in _EXTEND and char not in _PREPEND
    return category in ("Cc", "Zl", "Zp")


# Tokenizers read ahead (`read_tokenizer_ahead`), by their file's (path, size, mtime): the last folder's only.
_ahead: dict[tuple, Future[NllbTokenizer]] = {}
_ahead_lock = threading.Lock()


def read_tokenizer_ahead(model_dir: str | Path) -> None:
    """Start reading `model_dir`'s tokenizer on a thread of its own, for `NllbTokenizer.from_dir`
    (and so `open_checkpoint`) to take up. Reading it needs no torch, and sentencepiece parses its
    model without holding the interpreter: done while torch is imported, it costs a start nothing
    of the ~0.4 s it takes. A folder without the file is left to `from_dir` to refuse."""
    key = file_stamp(Path(model_dir) / SENTENCEPIECE_FILE)
    if key is None:
        return
    with _ahead_lock:
        if key in _ahead:
            return
        reading: Future[NllbTokenizer] = Future()
        _ahead.clear()
        _ahead[key] = reading

    def read() -> None:
        try:
            reading.set_result(NllbTokenizer._read(model_dir))
        except BaseException as error:  # TokenizerError: raised by `from_dir`, as reading it there would
            reading.set_exception(error)

    threading.Thread(target=read, name="dragoman-tokenizer", daemon=True).start()


# A sentencepiece model is a protobuf ModelProto; its field 3 is the NormalizerSpec, whose field 2
# is the precompiled character map. Read and rewritten by hand: protobuf is not a dependency.
_NORMALIZER_SPEC_FIELD = 3
_CHARSMAP_FIELD = 2
# NormalizerSpec{name: "identity", add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces}:
# sentencepiece then only turns spaces into "▁", adds the leading one and squeezes runs.
_IDENTITY_NORMALIZER_SPEC = b"\x0a\x08identity\x18\x01\x20\x01\x28\x01"


def _split_sentencepiece_model(model: bytes) -> tuple[bytes, bytes]:
    """(`model` with the identity normalizer instead of its own, its precompiled character map)."""
    kept, character_map, at = [], b"", 0
    for number, start, payload, end in _protobuf_fields(model):
        if number == _NORMALIZER_SPEC_FIELD:
            fields = _protobuf_fields(model, payload, end)
            character_map = next((model[value:stop] for field, _, value, stop in fields
                                  if field == _CHARSMAP_FIELD), b"")
            kept.append(model[at:start])
            at = end
    kept.append(model[at:])
    # field key (number, wire type 2 = length-delimited) and length each fit in one byte here
    identity = bytes([_NORMALIZER_SPEC_FIELD << 3 | 2, len(_IDENTITY_NORMALIZER_SPEC)])
    return b"".join(kept) + identity + _IDENTITY_NORMALIZER_SPEC, character_map


def _protobuf_fields(message: bytes, position: int = 0,
                     size: int | None = None) -> Iterator[tuple[int, int, int, int]]:
    """(field number, where it starts, where its payload starts, where it ends) for each field of the
    message in message[position:size]. Keys and lengths of one byte (a model's 256,000 pieces) are
    read in place."""
    size = len(message) if size is None else size
    while position < size:
        start = position
        key = message[position]
        if key < 0x80:
            position += 1
        else:
            key, position = _read_varint(message, position)
        wire_type = key & 7
        payload = position
        if wire_type == 0:
            _, position = _read_varint(message, position)
        elif wire_type == 2:
            length = message[position]
            if length < 0x80:
                position += 1
            else:
                length, position = _read_varint(message, position)
            payload = position
            position += length
        elif wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire_type}")
        if position > size:
            raise ValueError("truncated protobuf message")
        yield key >> 3, start, payload, position


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, position
