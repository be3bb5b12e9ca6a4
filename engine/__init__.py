"""The NLLB engine: checkpoint loading, tokenizer, model, paged KV cache, decoding. No Qt here.

This module is the engine's front door: the app imports these names from `engine` and never from
its modules.

- `Translator`: loads a checkpoint on a device and translates; `DecodingOptions` are its options;
  `Translation` a text's translation with its score and alternatives (`Translator.translate_full`).
  `Translator.submit(TranslationRequest) -> TranslationHandle` from any thread: the request joins
  what the engine's own loop decodes at its next step (`TYPED` text before `DOCUMENT`s); the handle
  streams partial hypotheses, gives the Translations, can be waited on and cancelled.
- Languages: `LANGUAGES`, `LANGUAGE_CODES`, `ISO_639_1`, `Language`, `get_language`,
  `resolve_language`, `NO_SPACE_SCRIPTS`.
- Checkpoints: `open_checkpoint`, `load_config`, `NllbConfig`, `weight_files`, `read_weight_map`,
  `check_weights`; `convert_bin` and `safetensors_name` (a .bin becomes safetensors); the file
  names `SENTENCEPIECE_FILE`, `SAFETENSORS_INDEX`, `PYTORCH_BIN_INDEX`; `read_ahead` (a
  start reads the tokenizer while torch is imported, and starts the GPU's context meanwhile and
  copies the weights there); `drop_uploads` (frees weights so copied for a
  model that did not load).
- Adapters: `adapter_names`, `adapter_folders` and `ADAPTER_FILES` (the folder's layout, read
  without torch); `scan_adapters` and `AdapterInfo` (every subfolder inspected); `check_adapter`.
- `TranslationCache`, the translations stored by what they depend on (a `Translator`'s
  `model_identity` among them).
- Devices: `cuda_device_names`.
- `NllbTokenizer`, a Translator's `tokenizer` (a document's process tokenizes with it, pickled).
- The errors the app shows: `CheckpointError`, `TokenizerError`, `AdapterError`, `OptionsError`,
  `DeviceError`, `UnknownLanguageError`.

Languages and the adapters folder's layout are imported here (neither needs torch); every other
name is imported on first use, from `_LAZY`'s module, so that `dragoman --help` and the window's
start do not load torch, Triton or sentencepiece before they need them; type checkers see them
imported under TYPE_CHECKING, each from its module. torch, when it comes, is imported without its
compiler's modules until something needs them (`lean_torch`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from dragoman.engine import lean_torch
from dragoman.engine.adapters import ADAPTER_FILES, adapter_folders, adapter_names
from dragoman.engine.languages import (
    ISO_639_1,
    LANGUAGE_CODES,
    LANGUAGES,
    NO_SPACE_SCRIPTS,
    Language,
    UnknownLanguageError,
    get_language,
    resolve_language,
)

lean_torch.install()  # before anything of the engine imports torch

if TYPE_CHECKING:  # the same names as `__getattr__` gives them, for type checkers and editors
    from dragoman.engine.translator import Translator
    from dragoman.engine.handle import Translation, TranslationHandle, TranslationRequest
    from dragoman.engine.scheduler import DOCUMENT, TYPED
    from dragoman.engine.decoding import DecodingOptions, OptionsError
    from dragoman.engine.checkpoint import open_checkpoint
    from dragoman.engine.config import CheckpointError, NllbConfig, load_config
    from dragoman.engine.tokenizer import SENTENCEPIECE_FILE, NllbTokenizer, TokenizerError
    from dragoman.engine.weights import PYTORCH_BIN_INDEX, SAFETENSORS_INDEX, check_weights, convert_bin, read_weight_map, safetensors_name, weight_files
    from dragoman.engine.peft_adapter import AdapterError, AdapterInfo, check_adapter, scan_adapters
    from dragoman.engine.translation_cache import TranslationCache
    from dragoman.engine.device import DeviceError, cuda_device_names
    from dragoman.engine.gpu_ahead import drop_uploads, read_ahead

_LAZY = {
    "Translator": "dragoman.engine.translator",
    "Translation": "dragoman.engine.handle",
    "TranslationRequest": "dragoman.engine.handle",
    "TranslationHandle": "dragoman.engine.handle",
    "TYPED": "dragoman.engine.scheduler",
    "DOCUMENT": "dragoman.engine.scheduler",
    "DecodingOptions": "dragoman.engine.decoding",
    "OptionsError": "dragoman.engine.decoding",
    "open_checkpoint": "dragoman.engine.checkpoint",
    "load_config": "dragoman.engine.config",
    "NllbConfig": "dragoman.engine.config",
    "CheckpointError": "dragoman.engine.config",
    "SENTENCEPIECE_FILE": "dragoman.engine.tokenizer",
    "TokenizerError": "dragoman.engine.tokenizer",
    "NllbTokenizer": "dragoman.engine.tokenizer",
    "weight_files": "dragoman.engine.weights",
    "read_weight_map": "dragoman.engine.weights",
    "check_weights": "dragoman.engine.weights",
    "convert_bin": "dragoman.engine.weights",
    "safetensors_name": "dragoman.engine.weights",
    "SAFETENSORS_INDEX": "dragoman.engine.weights",
    "PYTORCH_BIN_INDEX": "dragoman.engine.weights",
    "scan_adapters": "dragoman.engine.peft_adapter",
    "AdapterInfo": "dragoman.engine.peft_adapter",
    "check_adapter": "dragoman.engine.peft_adapter",
    "AdapterError": "dragoman.engine.peft_adapter",
    "TranslationCache": "dragoman.engine.translation_cache",
    "DatabaseError": "dragoman.engine.translation_cache",
    "open_database": "dragoman.engine.translation_cache",
    "read_json_object": "dragoman.engine.config",
    "cuda_device_names": "dragoman.engine.device",
    "DeviceError": "dragoman.engine.device",
    "read_ahead": "dragoman.engine.gpu_ahead",
    "drop_uploads": "dragoman.engine.gpu_ahead",
}

__all__ = [
    "ADAPTER_FILES", "adapter_folders", "adapter_names",
    "ISO_639_1", "LANGUAGE_CODES", "LANGUAGES", "NO_SPACE_SCRIPTS", "Language", "UnknownLanguageError", "get_language", "resolve_language",
    *_LAZY,
]


def __getattr__(name: str):
    # Looked up in its module on every use, not copied here: the module stays the one place the name is bound.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dragoman.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
