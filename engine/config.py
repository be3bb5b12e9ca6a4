"""Model shape and generation defaults, read from a Hugging Face NLLB (M2M100) checkpoint folder."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from dragoman.engine.decoding import MAX_LENGTH, DecodingOptions, OptionsError, check_int


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


# A model's or an adapter's JSON settings, the app's settings, take a few KB; a file far larger is not one.
MAX_JSON_BYTES = 4 << 20


def read_small_file(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. OSError for anything else, checked on
    what was opened (a link is followed): a FIFO (opened without waiting for a writer), a device
    such as /dev/zero, a folder, or a larger file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"larger than {limit >> 20} MiB, not a settings file")
    return data


def file_stamp(path: Path) -> tuple | None:
    """(the resolved path, size, modification time) of a file, which change when it is replaced or
    written; None if it cannot be read. What a file read ahead is checked against when taken up."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return str(path.resolve()), found.st_size, found.st_mtime_ns


def read_json_object(path: Path, error: type[Exception], missing: str) -> dict:
    """A JSON object file, or `error` naming the file and what is wrong (`missing` says what a missing file means)."""
    try:
        data = json.loads(read_small_file(path, MAX_JSON_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: missing ({missing})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        reason = e.strerror or str(e) if isinstance(e, OSError) else str(e)
        raise error(f"{path}: not readable JSON ({reason})") from None
    except RecursionError:
        raise error(f"{path}: not readable JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected a JSON object")
    return data


def _read_json(path: Path) -> dict:
    return read_json_object(path, CheckpointError, "not an NLLB checkpoint folder?")


# Bounds of config.json's sizes, far above the largest NLLB (3.3B: d_model 2048, 24 + 24 layers of
# 16 heads, ffn 8192, 256,206 tokens): a value past them is a damaged file, refused before the
# weights are looked at. Positions are computed, not stored, so no tensor bounds them.
MAX_LAYERS = 256
MAX_D_MODEL = 1 << 16
MAX_FFN_DIM = 1 << 20
MAX_VOCAB = 1 << 24
MAX_POSITIONS = MAX_LENGTH
REQUIRED = object()


class _Fields:
    """Typed reads of one JSON file's keys: CheckpointError naming the file and the key."""

    def __init__(self, path: Path, raw: dict):
        self.path, self.raw = path, raw

    def _get(self, key: str, default):
        if key not in self.raw:
            if default is REQUIRED:
                raise CheckpointError(f"{self.path}: missing key {key!r}")
            return default
        return self.raw[key]

    def integer(self, key: str, low: int, high: int, default=REQUIRED) -> int:
        try:
            return check_int(key, self._get(key, default), low, high)
        except OptionsError as e:
            raise CheckpointError(f"{self.path}: {e}") from None

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise CheckpointError(f"{self.path}: {key} must be true or false, not {value!r}")
        return value

    def text(self, key: str, default: str) -> str:
        value = self._get(key, default)
        if not isinstance(value, str):
            raise CheckpointError(f"{self.path}: {key} must be a string, not {value!r}")
        return value


def load_config(model_dir: str | Path) -> NllbConfig:
    path = Path(model_dir) / "config.json"
    raw = _read_json(path)
    model_type = raw.get("model_type")
    if model_type not in ("m2m_100", "nllb"):
        raise CheckpointError(f"{path}: model_type is {model_type!r}, expected 'm2m_100' (an NLLB checkpoint)")
    read = _Fields(path, raw)
    d_model = read.integer("d_model", 1, MAX_D_MODEL)
    vocab_size = read.integer("vocab_size", 1, MAX_VOCAB)
    heads = {}
    for side in ("encoder", "decoder"):
        key = f"{side}_attention_heads"
        heads[side] = read.integer(key, 1, d_model)
        if d_model % heads[side]:
            raise CheckpointError(f"{path}: d_model {d_model} is not divisible by {key} {heads[side]}")

    def token(key: str, default: int) -> int:
        return read.integer(key, 0, vocab_size - 1, default)

    config = NllbConfig(
        vocab_size=vocab_size,
        d_model=d_model,
        encoder_layers=read.integer("encoder_layers", 1, MAX_LAYERS),
        decoder_layers=read.integer("decoder_layers", 1, MAX_LAYERS),
        encoder_heads=heads["encoder"],
        decoder_heads=heads["decoder"],
        encoder_ffn_dim=read.integer("encoder_ffn_dim", 1, MAX_FFN_DIM),
        decoder_ffn_dim=read.integer("decoder_ffn_dim", 1, MAX_FFN_DIM),
        max_position_embeddings=read.integer("max_position_embeddings", 2, MAX_POSITIONS, 1024),
        scale_embedding=read.flag("scale_embedding", True),
        tie_word_embeddings=read.flag("tie_word_embeddings", True),
        activation=read.text("activation_function", "relu"),
        pad_id=token("pad_token_id", 1),
        bos_id=token("bos_token_id", 0),
        eos_id=token("eos_token_id", 2),
        decoder_start_id=token("decoder_start_token_id", 2),
    )
    if config.activation != "relu":
        raise CheckpointError(f"{path}: activation_function {config.activation!r} is not supported (NLLB uses relu)")
    return config


# generation_config.json's keys and the DecodingOptions fields they set.
GENERATION_KEYS = {
    "max_length": "max_length",
    "num_beams": "num_beams",
    "length_penalty": "length_penalty",
    "early_stopping": "early_stopping",
    "no_repeat_ngram_size": "no_repeat_ngram_size",
    "repetition_penalty": "repetition_penalty",
    "min_length": "min_length",
    "forced_eos_token_id": "forced_eos_id",
}


def load_generation_defaults(model_dir: str | Path, vocab_size: int | None = None) -> GenerationDefaults:
    """generation_config.json if present, else the generation keys of config.json (as transformers does).

    A key set to null is unset, as in transformers. Each value is checked as a decoding option
    (and a forced token against `vocab_size`): CheckpointError naming the file and the key.
    """
    model_dir = Path(model_dir)
    path = model_dir / "generation_config.json"
    if not path.exists():
        path = model_dir / "config.json"
    raw = _read_json(path)
    given = {field: raw[key] for key, field in GENERATION_KEYS.items() if raw.get(key) is not None}
    try:
        DecodingOptions(**given)
    except OptionsError as e:
        key = next(key for key, field in GENERATION_KEYS.items() if field == e.name)
        raise CheckpointError(f"{path}: {key} {e.problem}") from None
    forced = given.get("forced_eos_id")
    if forced is not None and vocab_size is not None and forced >= vocab_size:
        raise CheckpointError(f"{path}: forced_eos_token_id {forced} is not a token of the model ({vocab_size} tokens)")
    return GenerationDefaults(**given)
