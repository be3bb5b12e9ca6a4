"""Write a random-weight NLLB checkpoint of a published shape, in the published layout:
`python -m bench.checkpoint --size 600M DEST`.

For measuring the whole path a user takes (load from disk, tokenize, translate, decode) when no
real weights can be downloaded. Every matrix has its real size, the embedding NLLB's 256,206 rows,
and so has the sentencepiece model (`write_tokenizer`): 256,000 pieces that each show text, in
the scripts and characters documents hold (punctuation, digits, markup characters, Latin, Cyrillic,
Greek, Arabic, Hebrew, Devanagari, Thai, Han, kana, Hangul; with and without a word's leading
space), as a real NLLB vocabulary does. With a vocabulary that spells little, the ids past it decode
to nothing: document marks could not be written and a tag chain's gap would exclude most of the
vocabulary, which is not what users' models do.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import unicodedata
from pathlib import Path

import sentencepiece as spm
import torch
from safetensors.torch import save_file

from bench.__main__ import SHAPES, VOCAB, random_weights, shape_config


def write_checkpoint(dest: Path, size: str) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    shape = SHAPES[size]
    config = {
        "architectures": ["M2M100ForConditionalGeneration"],
        "model_type": "m2m_100",
        "vocab_size": VOCAB,
        "d_model": shape["d_model"],
        "encoder_layers": shape["layers"],
        "decoder_layers": shape["layers"],
        "encoder_attention_heads": 16,
        "decoder_attention_heads": 16,
        "encoder_ffn_dim": shape["ffn"],
        "decoder_ffn_dim": shape["ffn"],
        "max_position_embeddings": 1024,
        "scale_embedding": True,
        "activation_function": "relu",
        "pad_token_id": 1,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "decoder_start_token_id": 2,
        "max_length": 200,
        "tokenizer_class": "NllbTokenizer",
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    generation = {"bos_token_id": 0, "decoder_start_token_id": 2, "eos_token_id": 2, "max_length": 200, "pad_token_id": 1}
    (dest / "generation_config.json").write_text(json.dumps(generation, indent=2))

    weights = random_weights(shape_config(size), torch.device("cpu"), torch.float32)
    tensors = {"model.shared.weight": weights.pop("embed_tokens.weight")}
    del weights["lm_head.weight"]  # tied: stored once, as save_pretrained does
    tensors.update({f"model.{name}": tensor for name, tensor in weights.items()})
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})

    write_tokenizer(dest / "sentencepiece.bpe.model")
    return dest


def checkpoint_in(given: Path | None, work: Path, size: str) -> Path:
    """A bench's --checkpoint: the folder given, written there if it holds none yet, or a new one in `work`."""
    checkpoint = given or work / "checkpoint"
    if not (checkpoint / "config.json").exists():
        write_checkpoint(checkpoint, size)
    return checkpoint


def _span(first: str, last: str) -> str:
    """The assigned characters from `first` to `last`."""
    return "".join(chr(c) for c in range(ord(first), ord(last) + 1) if unicodedata.category(chr(c)) != "Cn")


# The characters of the pieces, by script: what documents hold.
SCRIPTS = {
    "latin": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + _span("\u00c0", "\u017f"),
    "cyrillic": _span("\u0400", "\u04ff"),
    "greek": _span("\u0370", "\u03ff"),
    "arabic": _span("\u0600", "\u06ff"),
    "hebrew": _span("\u0591", "\u05f4"),
    "devanagari": _span("\u0900", "\u097f"),
    "thai": _span("\u0e01", "\u0e5b"),
    "han": _span("一", "龥"),
    "kana": _span("ぁ", "ゖ") + _span("ァ", "ヺ"),
    "hangul": _span("가", "힣"),
}
SYMBOLS = "0123456789.,;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`«»„“”‘’…–—€£¥§°·•¶©®™。，、！？：；「」『』（）《》"
NO_SPACE = ("han", "kana", "thai")  # written without spaces: no word-initial pieces


def write_tokenizer(path: Path, pieces: int = 256_000) -> Path:
    """A unigram sentencepiece model of `pieces` pieces (NLLB's 256,000) in NLLB's layout (<unk>,
    <s>, </s> first), every piece text: each character of SCRIPTS and SYMBOLS, alone and after the
    word-start "▁", then made-up words of each script, likewise, until there are `pieces`."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    model_file = io.BytesIO()  # a trained model for its normaliser and trainer settings; its pieces are replaced
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a b c"] * 10), model_writer=model_file, vocab_size=8, model_type="unigram",
        bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2, hard_vocab_limit=False,
    )
    model = model_pb2.ModelProto()
    model.ParseFromString(model_file.getvalue())
    specials = [(p.piece, p.score, p.type) for p in model.pieces[:3]]
    texts: dict[str, None] = {}
    for char in "".join(SCRIPTS.values()) + SYMBOLS:
        texts[char] = None
        texts["▁" + char] = None
    rng = random.Random(0)
    scripts = list(SCRIPTS.items())
    while len(texts) < pieces - len(specials):
        name, letters = rng.choice(scripts)
        word = "".join(rng.choice(letters) for _ in range(rng.randint(2, 3 if name in NO_SPACE else 7)))
        texts[word if name in NO_SPACE or rng.random() < 0.4 else "▁" + word] = None
    del model.pieces[:]
    for piece, score, kind in specials:
        model.pieces.add(piece=piece, score=score, type=kind)
    for text in list(texts)[: pieces - len(specials)]:
        model.pieces.add(piece=text, score=-float(len(text.removeprefix("▁"))) ** -1 - 1.0)  # longer pieces win
    model.trainer_spec.vocab_size = pieces
    path.write_bytes(model.SerializeToString())
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.checkpoint")
    parser.add_argument("--size", choices=SHAPES, default="600M")
    parser.add_argument("dest", type=Path)
    args = parser.parse_args()
    print(write_checkpoint(args.dest, args.size))
