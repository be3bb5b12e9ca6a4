"""Write a random-weight NLLB checkpoint of a published shape, in the published layout:
`python -m bench.checkpoint --size 600M DEST`.

For measuring the whole path a user takes (load from disk, tokenize, translate, decode) when no
real weights can be downloaded. The sentencepiece model is a small one trained here on made-up
words; the embedding keeps NLLB's 256,206 rows, so every matrix has its real size.
"""

from __future__ import annotations

import argparse
import io
import json
import random
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

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    text = "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(3000))
    model_file = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text.splitlines()), model_writer=model_file, vocab_size=1000, model_type="bpe",
        bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2,
    )
    (dest / "sentencepiece.bpe.model").write_bytes(model_file.getvalue())
    return dest


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.checkpoint")
    parser.add_argument("--size", choices=SHAPES, default="600M")
    parser.add_argument("dest", type=Path)
    args = parser.parse_args()
    print(write_checkpoint(args.dest, args.size))
