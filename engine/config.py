"""Model shape and generation defaults, read from a Hugging Face NLLB (M2M100) checkpoint folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


class CheckpointError(ValueError):
    """A model folder that is not a usable NLLB checkpoint; the message names the file and the problem."""


@dataclass(frozen=True)
class NllbConfig:
    vocab_size: int
    d_model: int
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    encoder_ffn_dim: int
    decoder_ffn_dim: int
    max_position_embeddings: int
    scale_embedding: bool = True
    tie_word_embeddings: bool = True
    activation: str = "relu"
    pad_id: int = 1
    bos_id: int = 0
    eos_id: int = 2
    decoder_start_id: int = 2

    @property
    def head_dim(self) -> int:
        return self.d_model // self.decoder_heads


@dataclass(frozen=True)
class GenerationDefaults:
    """What the checkpoint's generation_config.json says; None where it is silent."""

    max_length: int = 200
    num_beams: int | None = None
    length_penalty: float | None = None
    early_stopping: bool | str | None = None
    no_repeat_ngram_size: int | None = None
    repetition_penalty: float | None = None
    min_length: int | None = None
    forced_eos_id: int | None = None


def read_json_object(path: Path, error: type[Exception], missing: str) -> dict:
    """A JSON object file, or `error` naming the file and what is wrong (`missing` says what a missing file means)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: missing ({missing})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise error(f"{path}: not readable JSON ({e})") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected a JSON object")
    return data


def _read_json(path: Path) -> dict:
    return read_json_object(path, CheckpointError, "not an NLLB checkpoint folder?")


def load_config(model_dir: str | Path) -> NllbConfig:
    path = Path(model_dir) / "config.json"
    raw = _read_json(path)
    model_type = raw.get("model_type")
    if model_type not in ("m2m_100", "nllb"):
        raise CheckpointError(f"{path}: model_type is {model_type!r}, expected 'm2m_100' (an NLLB checkpoint)")
    try:
        config = NllbConfig(
            vocab_size=int(raw["vocab_size"]),
            d_model=int(raw["d_model"]),
            encoder_layers=int(raw["encoder_layers"]),
            decoder_layers=int(raw["decoder_layers"]),
            encoder_heads=int(raw["encoder_attention_heads"]),
            decoder_heads=int(raw["decoder_attention_heads"]),
            encoder_ffn_dim=int(raw["encoder_ffn_dim"]),
            decoder_ffn_dim=int(raw["decoder_ffn_dim"]),
            max_position_embeddings=int(raw.get("max_position_embeddings", 1024)),
            scale_embedding=bool(raw.get("scale_embedding", True)),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", True)),
            activation=str(raw.get("activation_function", "relu")),
            pad_id=int(raw.get("pad_token_id", 1)),
            bos_id=int(raw.get("bos_token_id", 0)),
            eos_id=int(raw.get("eos_token_id", 2)),
            decoder_start_id=int(raw.get("decoder_start_token_id", 2)),
        )
    except KeyError as e:
        raise CheckpointError(f"{path}: missing key {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: bad value ({e})") from None
    if config.activation != "relu":
        raise CheckpointError(f"{path}: activation_function {config.activation!r} is not supported (NLLB uses relu)")
    if config.d_model % config.encoder_heads or config.d_model % config.decoder_heads:
        raise CheckpointError(f"{path}: d_model {config.d_model} is not divisible by the number of heads")
    return config


def load_generation_defaults(model_dir: str | Path) -> GenerationDefaults:
    """generation_config.json if present, else the generation keys of config.json (as transformers does)."""
    model_dir = Path(model_dir)
    path = model_dir / "generation_config.json"
    raw = _read_json(path) if path.exists() else _read_json(model_dir / "config.json")

    def get(key, kind):
        value = raw.get(key)
        return None if value is None else kind(value)

    return GenerationDefaults(
        max_length=get("max_length", int) or GenerationDefaults.max_length,
        num_beams=get("num_beams", int),
        length_penalty=get("length_penalty", float),
        early_stopping=raw.get("early_stopping"),
        no_repeat_ngram_size=get("no_repeat_ngram_size", int),
        repetition_penalty=get("repetition_penalty", float),
        min_length=get("min_length", int),
        forced_eos_id=get("forced_eos_token_id", int),
    )
