"""A checkpoint folder checked as a whole before anything is allocated: config.json,
generation_config.json, the sentencepiece model and the weight files' headers.

The translator opens a model through it, and the app checks a folder through it before importing
one, so both refuse a broken folder with the same one line naming the file and what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dragoman.engine.config import CheckpointError, GenerationDefaults, NllbConfig, load_config, load_generation_defaults
from dragoman.engine.tokenizer import SENTENCEPIECE_FILE, NllbTokenizer, TokenizerError
from dragoman.engine.weights import WEIGHT_FILES, check_weights, weight_files


@dataclass(frozen=True)
class Checkpoint:
    folder: Path
    config: NllbConfig
    generation_defaults: GenerationDefaults
    tokenizer: NllbTokenizer


def open_checkpoint(folder: str | Path) -> Checkpoint:
    """The folder's config, generation defaults and tokenizer once every file checks out (the
    weights by their headers: `check_weights`); CheckpointError naming the file and the problem."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: not a folder")
    missing = []
    if not (folder / "config.json").is_file():
        missing.append("config.json")
    if not weight_files(folder):
        missing.append(f"the weights ({' or '.join(WEIGHT_FILES)})")
    if not (folder / SENTENCEPIECE_FILE).is_file():
        missing.append(f"the tokenizer ({SENTENCEPIECE_FILE})")
    if missing:
        listed = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + " and " + missing[-1]
        raise CheckpointError(f"{folder} is not an NLLB checkpoint: it is missing {listed}.")
    config = load_config(folder)
    generation_defaults = load_generation_defaults(folder, config.vocab_size)
    try:
        tokenizer = NllbTokenizer.from_dir(folder)
    except TokenizerError as e:
        raise CheckpointError(str(e)) from None
    if tokenizer.vocab_size > config.vocab_size:
        raise CheckpointError(
            f"{folder / 'config.json'}: vocab_size is {config.vocab_size} but the tokenizer has "
            f"{tokenizer.vocab_size} tokens: tokenizer and weights do not belong together"
        )
    check_weights(folder, config)
    return Checkpoint(folder, config, generation_defaults, tokenizer)
