"""PEFT LoRA adapter folders, read and checked against the model: nothing here touches a device.

An adapters folder holds one PEFT LoRA adapter per subfolder (`adapter_config.json` +
`adapter_model.safetensors`), named by the subfolder (engine/adapters.py). `scan_adapters` lists
them and says what is wrong with the broken ones; `load_adapter` reads one and checks it against
the model. The delta of a targeted module is PEFT's: `lora_B(lora_A(x)) * scaling`, scaling =
lora_alpha / r (or / sqrt(r) with rsLoRA), rank and alpha per module through `rank_pattern` and
`alpha_pattern`. `modules_to_save` is served for layer norms (a per-adapter copy is small); a copy
of any other module, and LoRA variants that change the forward pass (DoRA, ...), are refused by
name. The config's module patterns are regular expressions from an untrusted file: they are matched
as PEFT matches them, but without backtracking (engine/linear_regex.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dragoman.engine.adapters import CONFIG_FILE, WEIGHTS_FILE, adapter_folders
from dragoman.engine.config import NllbConfig, read_json_object
from dragoman.engine.decoding import OptionsError, check_int
from dragoman.engine.linear_regex import LinearPattern, PatternError, compile_pattern
from dragoman.engine.weights import expected_shapes

# Settings that change what a LoRA adapter computes, which Dragoman does not implement: refused when set.
UNSUPPORTED = {
    "use_dora": "DoRA (use_dora)",
    "lora_bias": "a bias on lora_B (lora_bias)",
    "layer_replication": "layer replication",
    "use_qalora": "QA-LoRA (use_qalora)",
    "target_parameters": "LoRA on bare parameters (target_parameters)",
    "trainable_token_indices": "trainable tokens (trainable_token_indices)",
    "alora_invocation_tokens": "activated LoRA (alora_invocation_tokens)",
    "velora_config": "VeLoRA",
    "monteclora_config": "MonteCLoRA",
    "use_bdlora": "block-diagonal LoRA (use_bdlora)",
    "arrow_config": "Arrow routing",
    "kasa_config": "KaSA",
    "megatron_config": "Megatron layers",
}
# Settings that do not change inference (or are checked below): any value is fine.
KNOWN = {
    "peft_type", "task_type", "base_model_name_or_path", "revision", "inference_mode", "auto_mapping",
    "peft_version", "r", "lora_alpha", "lora_dropout", "target_modules", "exclude_modules", "use_rslora",
    "rank_pattern", "alpha_pattern", "layers_to_transform", "layers_pattern", "modules_to_save",
    "init_lora_weights", "bias", "fan_in_fan_out", "megatron_core", "qalora_group_size", "loftq_config",
    "eva_config", "corda_config", "lora_ga_config", "runtime_config", "ensure_weight_tying",
}
# init_lora_weights values whose adapters only work on a base model they changed (PiSSA, OLoRA,
# CorDA, LoftQ, LoRA-GA), or with a different forward (MiCA).
BASE_CHANGING_INITS = ("pissa", "olora", "corda", "loftq", "lora_ga", "mica")
DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2")
# Far above any adapter's: a rank past MAX_RANK is a damaged file, and past MAX_ALPHA a scaling
# (alpha / rank) only overflows the activations.
MAX_RANK = 4096
MAX_ALPHA = 1e5
FLOAT16_MAX = torch.finfo(torch.float16).max
# The JSON types of adapter_config.json's module settings ([str]: a list of strings), and their words.
FIELD_TYPES = {
    "target_modules": ((str, [str]), "a regular expression or a list of module names"),
    "exclude_modules": ((str, [str]), "a regular expression or a list of module names"),
    "modules_to_save": (([str],), "a list of module names"),
    "layers_to_transform": ((int, [int]), "a layer index or a list of them"),
    "layers_pattern": ((str, [str]), "a pattern or a list of them"),
    "use_rslora": ((bool,), "true or false"),
}
# The layer index of a module key, when layers_pattern does not say where it is (PEFT's default).
LAYER_INDEX = re.compile(r".*?\.[^.]*\.(\d+)\.")
LAYER_NUMBER = re.compile(r"\.(\d+)\.")


class AdapterError(ValueError):
    """An adapter that cannot be used; the message names the file and the problem."""


# -- NLLB's modules, as PEFT names them -----------------------------------------------------------


def linear_modules(config: NllbConfig) -> dict[str, tuple[int, int]]:
    """Every module LoRA can target ('encoder.layers.0.self_attn.q_proj', ...) with its (out, in)."""
    return {name.removesuffix(".weight"): shape for name, shape in expected_shapes(config).items()
            if len(shape) == 2}


def norm_modules(config: NllbConfig) -> dict[str, int]:
    """Every layer norm ('encoder.layer_norm', ...) with its width: what modules_to_save may replace."""
    return {name.removesuffix(".weight"): shape[0] for name, shape in expected_shapes(config).items()
            if name.endswith("norm.weight")}


# -- reading an adapter folder --------------------------------------------------------------------


@dataclass(frozen=True)
class AdapterInfo:
    """What `scan_adapters` finds in one subfolder, without reading its tensors."""

    name: str
    path: Path
    error: str | None = None  # why it cannot be used; None for a good adapter
    rank: int = 0  # the largest rank of its modules
    alpha: float = 0.0
    use_rslora: bool = False
    modules: tuple[str, ...] = ()  # the LoRA-targeted modules
    norms: tuple[str, ...] = ()  # the layer norms it replaces (modules_to_save)
    size: int = 0  # bytes of adapter_model.safetensors

    def targets(self) -> str:
        """The targeted projections per side: 'encoder q_proj v_proj; decoder q_proj v_proj cross_attn.k_proj'."""
        sides = []
        for side in ("encoder", "decoder"):
            kinds = sorted({m.split(".", 3)[3].removeprefix("self_attn.").replace("encoder_attn.", "cross_attn.")
                            for m in self.modules if m.startswith(side)},
                           key=lambda k: (k.startswith("cross_attn."), PROJECTIONS.index(k.rsplit(".", 1)[-1])))
            if kinds:
                sides.append(f"{side} {' '.join(kinds)}")
        if self.norms:
            sides.append(f"{len(self.norms)} layer norm{'s' if len(self.norms) > 1 else ''}")
        return "; ".join(sides)


@dataclass
class LoraModule:
    a: torch.Tensor  # (r, in): float32 as read, the slots' dtype once staged (engine/lora_pool.py)
    b: torch.Tensor  # (out, r)
    scale: float


@dataclass
class Adapter:
    """A checked adapter in host memory, ready to be copied into a slot."""

    name: str
    identity: int  # nonzero; equal for byte-identical adapters: what output caches key on
    signature: tuple  # the files' identity on disk when read (see `signature`)
    lora: dict[str, LoraModule]
    norms: dict[str, tuple[torch.Tensor, torch.Tensor]]  # module -> (weight, bias), float32


def signature(folder: Path) -> tuple:
    """Changes when either file of the adapter is replaced or rewritten."""
    stats = [os.stat(folder / name) for name in (CONFIG_FILE, WEIGHTS_FILE)]
    return (str(folder.resolve()),) + tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)


def _read_config(folder: Path) -> dict:
    path = folder / CONFIG_FILE
    raw = read_json_object(path, AdapterError, f"a PEFT adapter folder holds {CONFIG_FILE} and {WEIGHTS_FILE}")
    peft_type = raw.get("peft_type")
    if peft_type != "LORA":
        raise AdapterError(f"{path}: peft_type is {peft_type!r}: only LoRA adapters are supported")
    for key, what in UNSUPPORTED.items():
        if raw.get(key):
            raise AdapterError(f"{path}: {what} is not supported")
    unknown = sorted(k for k, v in raw.items() if k not in KNOWN and k not in UNSUPPORTED and v)
    if unknown:
        raise AdapterError(f"{path}: setting {unknown[0]}={raw[unknown[0]]!r} is not supported by this version")
    if raw.get("bias", "none") != "none":
        raise AdapterError(f"{path}: bias={raw['bias']!r} (trained base-model biases) is not supported")
    init = str(raw.get("init_lora_weights", True)).lower()
    if init.startswith(BASE_CHANGING_INITS):
        raise AdapterError(
            f"{path}: init_lora_weights={raw['init_lora_weights']!r} adapters need the base model their "
            "initialisation changed: not supported (save them converted, with save_pretrained("
            "path_initial_model_for_weight_conversion=...))"
        )
    try:
        check_int("r", raw.get("r", 8), 1, MAX_RANK)
        _check_alpha("lora_alpha", raw.get("lora_alpha", 8))
        for key, check in (("rank_pattern", lambda name, v: check_int(name, v, 1, MAX_RANK)),
                           ("alpha_pattern", _check_alpha)):
            entries = raw.get(key) or {}
            if not isinstance(entries, dict):
                raise OptionsError(key, "must be an object of module patterns and values")
            for entry, value in entries.items():
                check(f"{key}[{entry!r}]", value)
    except OptionsError as e:
        raise AdapterError(f"{path}: {e}") from None
    for key, (kinds, said) in FIELD_TYPES.items():
        value = raw.get(key)
        if value is not None and not _is_one_of(value, kinds):
            raise AdapterError(f"{path}: {key} must be {said}, not {_shown(value)}")
    return raw


def _check_alpha(name: str, value) -> float:
    # NaN fails the comparison too.
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= MAX_ALPHA:
        raise OptionsError(name, f"must be a number above 0 and at most {MAX_ALPHA:g}, not {value!r}")
    return float(value)


def _is_one_of(value, kinds: tuple) -> bool:
    for kind in kinds:
        if isinstance(kind, list):  # a list of that element type
            if isinstance(value, list) and all(_is_one_of(v, tuple(kind)) for v in value):
                return True
        elif isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return True
    return False


def _shown(value, limit: int = 80) -> str:
    """`value` for a one-line message: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class _Patterns:
    """adapter_config.json's module patterns, compiled to run without backtracking (engine/linear_regex.py)."""

    targets: LinearPattern | None  # target_modules written as one regular expression
    exclude: LinearPattern | None  # exclude_modules written as one regular expression
    saved: tuple[LinearPattern, ...]  # modules_to_save
    layers: tuple[LinearPattern, ...]  # layers_pattern
    ranks: tuple[tuple[LinearPattern, int], ...]  # rank_pattern, in order
    alphas: tuple[tuple[LinearPattern, float], ...]  # alpha_pattern, in order


def _module_patterns(raw: dict, path: Path) -> _Patterns:
    """The patterns of a checked config (`_read_config`), each written into the regular expression PEFT
    builds around it; AdapterError naming the field and the pattern when one cannot be run."""

    def compiled(field: str, pattern: str, regex: str) -> LinearPattern:
        try:
            return compile_pattern(regex)
        except PatternError as e:
            raise AdapterError(f"{path}: {field} {_shown(pattern)} {e}") from None

    def entries(field: str) -> tuple[tuple[LinearPattern, Any], ...]:
        # the values as _read_config checked them: ints for rank_pattern, numbers for alpha_pattern
        return tuple((compiled(field, e, rf"(.*\.)?({e})$"), v) for e, v in (raw.get(field) or {}).items())

    targets, exclude = raw.get("target_modules"), raw.get("exclude_modules")
    layers = [raw["layers_pattern"]] if isinstance(raw.get("layers_pattern"), str) else raw.get("layers_pattern") or []
    return _Patterns(
        targets=(compiled("target_modules", targets, targets)
                 if isinstance(targets, str) and targets.lower() != "all-linear" else None),
        exclude=compiled("exclude_modules", exclude, exclude) if isinstance(exclude, str) and exclude else None,
        saved=tuple(compiled("modules_to_save", m, rf"(^|.*\.){m}($|\..*)") for m in raw.get("modules_to_save") or []),
        layers=tuple(compiled("layers_pattern", p, rf"(?:^|.*?\.){p}\.\d+\.") for p in layers),
        ranks=entries("rank_pattern"),
        alphas=entries("alpha_pattern"),
    )


def _is_targeted(raw: dict, patterns: _Patterns, key: str) -> bool:
    """PEFT's check_target_module_exists for one module key ('model.encoder.layers.0.fc1')."""
    exclude = raw.get("exclude_modules")
    if exclude:
        if patterns.exclude is not None:
            if patterns.exclude.fullmatch(key):
                return False
        elif key in exclude or any(key.endswith(f".{e}") for e in exclude):
            return False
    if any(saved.match(key) for saved in patterns.saved):
        return False
    targets = raw.get("target_modules")
    if not targets:
        return False
    if isinstance(targets, str):
        return patterns.targets is None or patterns.targets.fullmatch(key)
    if key in targets:
        return True
    if not any(key.endswith(f".{t}") for t in targets):
        return False
    layers = raw.get("layers_to_transform")
    if layers is None or layers == []:
        return True
    if not patterns.layers:
        match = LAYER_INDEX.match(key)
    else:
        # PEFT takes the digits after the pattern's match; an NLLB module name has one number,
        # its layer's index, so those digits can only be it.
        match = LAYER_NUMBER.search(key) if any(layer.match(key) for layer in patterns.layers) else None
    if not match:
        return False
    index = int(match.group(1))
    return index == layers if isinstance(layers, int) else index in layers


def _pattern_value(entries: tuple, key: str, default):
    """PEFT's rank_pattern / alpha_pattern lookup (get_pattern_key): the first matching entry."""
    for pattern, value in entries:
        if pattern.match(key):
            return value
    return default


def _safetensors_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (dtype, shape) from a safetensors file's header, after checking the file is whole."""
    if not path.exists():
        for pickled in ("adapter_model.bin", "adapter_model.pt"):
            if (path.parent / pickled).exists():
                raise AdapterError(
                    f"{path.parent / pickled}: a pickle file; Dragoman reads only {WEIGHTS_FILE}, which runs no "
                    "code when loaded (re-save the adapter with save_pretrained(safe_serialization=True))"
                )
        raise AdapterError(f"{path}: missing")
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        header_len = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        try:
            if not 0 < header_len <= min(size - 8, 100 << 20):
                raise ValueError("bad header length")
            header = json.loads(f.read(header_len))
        except (ValueError, UnicodeDecodeError):
            if head.startswith(b"PK\x03\x04") or head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
                raise AdapterError(
                    f"{path}: a pickle (torch.save) file, not safetensors: refused, loading it could run code"
                ) from None
            raise AdapterError(f"{path}: not a safetensors file (unreadable header); is it truncated?") from None
    if not isinstance(header, dict):
        raise AdapterError(f"{path}: not a safetensors file (unreadable header)")
    tensors, end = {}, 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, stop = entry["dtype"], tuple(entry["shape"]), int(entry["data_offsets"][1])
        except (KeyError, TypeError, ValueError):
            raise AdapterError(f"{path}: not a safetensors file (bad entry for {name!r})") from None
        tensors[name] = (dtype, shape)
        end = max(end, stop)
    if 8 + header_len + end != size:
        raise AdapterError(f"{path}: {size} bytes where its header describes {8 + header_len + end}: truncated or damaged")
    return tensors


def _module_of(key: str) -> tuple[str, str]:
    """'base_model.model.model.encoder.layers.0.fc1.lora_A.weight' -> ('encoder.layers.0.fc1', 'lora_A.weight')."""
    name = key.removeprefix("base_model.model.").removeprefix("model.")
    for part in ("lora_A.weight", "lora_B.weight", "lora_B.bias", "lora_magnitude_vector", "lora_embedding_A",
                 "lora_embedding_B"):
        if f".{part}" in name:
            module, _, rest = name.partition(f".{part}")
            return module, part + rest
    module, _, param = name.rpartition(".")
    return module, param


@dataclass
class _Parsed:
    raw: dict
    lora: dict[str, dict[str, str]] = field(default_factory=dict)  # module -> {"lora_A.weight": key, ...}
    ranks: dict[str, int] = field(default_factory=dict)
    scales: dict[str, float] = field(default_factory=dict)
    norms: dict[str, dict[str, str]] = field(default_factory=dict)  # module -> {"weight": key, "bias": key}


def _inspect(folder: Path, config: NllbConfig | None) -> _Parsed:
    """Everything that can be checked without reading the tensors' data; `config` adds the shapes."""
    raw = _read_config(folder)
    path = folder / WEIGHTS_FILE
    header = _safetensors_header(path)
    # Without the model's config, names are checked against the largest NLLB (24 + 24 layers).
    shape_config = config or NllbConfig(vocab_size=1, d_model=1, encoder_layers=24, decoder_layers=24, encoder_heads=1,
                                        decoder_heads=1, encoder_ffn_dim=1, decoder_ffn_dim=1, max_position_embeddings=1)
    modules, norms = linear_modules(shape_config), norm_modules(shape_config)
    patterns = _module_patterns(raw, folder / CONFIG_FILE)
    targeted = {m for m in modules if _is_targeted(raw, patterns, f"model.{m}")}
    if not targeted:
        raise AdapterError(
            f"{folder / CONFIG_FILE}: target_modules {raw.get('target_modules')!r} select no module of NLLB "
            f"(its linear layers are {', '.join(PROJECTIONS)}, in encoder and decoder)"
        )
    parsed = _Parsed(raw)
    for key, (dtype, shape) in header.items():
        module, param = _module_of(key)
        if dtype not in DTYPES:
            raise AdapterError(f"{path}: tensor {key!r} has dtype {dtype}; expected F32, F16 or BF16")
        if param in ("lora_A.weight", "lora_B.weight"):
            if module.endswith(("lm_head", "shared", "embed_tokens")):
                raise AdapterError(f"{path}: tensor {key!r}: LoRA on the embedding or output layer is not supported")
            if module not in modules:
                raise AdapterError(f"{path}: tensor {key!r} targets {module!r}, which is not a module of this NLLB model")
            if module not in targeted:
                raise AdapterError(
                    f"{path}: tensor {key!r} targets {module!r}, which {CONFIG_FILE}'s target_modules does not select"
                )
            if len(shape) != 2:
                raise AdapterError(f"{path}: tensor {key!r} has shape {shape}; expected a matrix")
            parsed.lora.setdefault(module, {})[param] = key
        elif param.startswith(("lora_embedding", "lora_magnitude", "lora_B.bias")):
            raise AdapterError(f"{path}: tensor {key!r}: {param.split('.')[0]} is not supported")
        elif module in norms:
            if param not in ("weight", "bias") or len(shape) != 1:
                raise AdapterError(f"{path}: tensor {key!r} is not a layer norm's weight or bias")
            parsed.norms.setdefault(module, {})[param] = key
        else:
            raise AdapterError(
                f"{path}: tensor {key!r} is a whole copy of {module!r} (modules_to_save): only layer norms can be "
                "replaced per adapter; merge this adapter into the model (PEFT's merge_and_unload) and use that model"
            )
    if not parsed.lora and not parsed.norms:
        raise AdapterError(f"{path}: holds no LoRA tensors")
    r, alpha = raw.get("r", 8), raw.get("lora_alpha", 8)
    for module, params in parsed.lora.items():
        for needed in ("lora_A.weight", "lora_B.weight"):
            if needed not in params:
                raise AdapterError(f"{path}: {module!r} has no {needed} tensor; truncated or incomplete adapter?")
        (_, a_shape), (_, b_shape) = header[params["lora_A.weight"]], header[params["lora_B.weight"]]
        rank = a_shape[0]
        expected_rank = _pattern_value(patterns.ranks, f"model.{module}", r)
        if b_shape[1] != rank or rank != expected_rank:
            raise AdapterError(
                f"{path}: {module!r} has lora_A {a_shape} and lora_B {b_shape}; {CONFIG_FILE} gives it rank {expected_rank}"
            )
        if config is not None and (b_shape[0], a_shape[1]) != modules[module]:
            out, inp = modules[module]
            raise AdapterError(
                f"{path}: {module!r} has lora_A {a_shape} and lora_B {b_shape}, but the model's module is {out}x{inp}: "
                "an adapter for another base model"
            )
        module_alpha = _pattern_value(patterns.alphas, f"model.{module}", alpha)
        parsed.ranks[module] = rank
        parsed.scales[module] = module_alpha / (math.sqrt(rank) if raw.get("use_rslora") else rank)
    for module, params in parsed.norms.items():
        if set(params) != {"weight", "bias"}:
            raise AdapterError(f"{path}: layer norm {module!r} needs both weight and bias")
        width, expected = header[params["weight"]][1], (norms[module],) if config is not None else None
        if header[params["bias"]][1] != width or expected is not None and width != expected:
            raise AdapterError(f"{path}: layer norm {module!r} has width {width}; the model's is {expected}")
    return parsed


def scan_adapters(folder: str | Path, config: NllbConfig | None = None) -> list[AdapterInfo]:
    """Every subfolder of `folder` (hidden ones aside), in name order: good adapters and broken ones.
    With the model's `config` the shapes are checked too."""
    found = []
    for sub in adapter_folders(folder):
        try:
            parsed = _inspect(sub, config)
        except AdapterError as e:
            found.append(AdapterInfo(sub.name, sub, error=str(e)))
            continue
        raw = parsed.raw
        found.append(AdapterInfo(
            sub.name, sub, rank=max(parsed.ranks.values(), default=0), alpha=raw.get("lora_alpha", 8),
            use_rslora=bool(raw.get("use_rslora")), modules=tuple(sorted(parsed.lora)), norms=tuple(sorted(parsed.norms)),
            size=(sub / WEIGHTS_FILE).stat().st_size,
        ))
    return found


def load_adapter(folder: str | Path, config: NllbConfig, name: str | None = None) -> Adapter:
    """Read and check the adapter in `folder` against the model's `config`: AdapterError if it is unusable."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    folder = Path(folder)
    try:
        before = signature(folder)
    except OSError:
        before = None  # _inspect names the missing file
    parsed = _inspect(folder, config)
    path = folder / WEIGHTS_FILE
    try:
        config_bytes = (folder / CONFIG_FILE).read_bytes()
        data = path.read_bytes()
        tensors = load(data)
    except (OSError, SafetensorError) as e:
        raise AdapterError(f"{path}: unreadable ({e}); is it truncated?") from None
    try:
        after = signature(folder)
    except OSError:
        after = None
    if before is None or after != before:
        raise AdapterError(f"{folder}: changed while it was being read; try again once it is written")
    for key, tensor in tensors.items():
        low, high = tensor.float().aminmax()
        if not (low.isfinite() and high.isfinite()):
            raise AdapterError(f"{path}: tensor {key!r} holds NaN or infinite values")
        if max(-low, high) > FLOAT16_MAX:  # the slots may be float16
            raise AdapterError(f"{path}: tensor {key!r} holds values beyond float16's range (±{FLOAT16_MAX:g})")
    lora = {
        module: LoraModule(tensors[params["lora_A.weight"]].float(), tensors[params["lora_B.weight"]].float(),
                           parsed.scales[module])
        for module, params in parsed.lora.items()
    }
    norms = {module: (tensors[p["weight"]].float(), tensors[p["bias"]].float()) for module, p in parsed.norms.items()}
    digest = hashlib.sha256(config_bytes + b"\0" + data).digest()
    identity = int.from_bytes(digest[:8], "little") >> 1 or 1
    return Adapter(name or folder.name, identity, before, lora, norms)


def check_adapter_name(name: str) -> None:
    if not name or name.startswith(".") or "/" in name or "\\" in name or name != name.strip():
        raise AdapterError(f"{name!r} is not an adapter name (the name of a subfolder of the adapters folder)")


def check_adapter(folder: str | Path, name: str, config: NllbConfig | None = None) -> Path:
    """The folder of adapter `name` in `folder`, after the checks that need no tensor data; AdapterError if unusable."""
    check_adapter_name(name)
    path = Path(folder) / name
    if not path.is_dir():
        raise AdapterError(f"adapter {name!r}: no such folder in {folder}")
    _inspect(path, config)
    return path
