"""Installed models: import a Hugging Face NLLB checkpoint folder, download one from the hub, list them.

Each model lives in its own folder under the app's models dir, always with safetensors weights:
a `pytorch_model.bin` is converted once on import (by the engine, weights only: no pickled code
runs). Imports and downloads are staged in a hidden folder and moved into place at the end, so a
crash or a cancel never leaves a half model that looks installed. Nothing here touches Qt: the
window runs these functions on a task thread and passes `report` and `should_stop`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dragoman.engine import (
    PYTORCH_BIN_INDEX,
    SAFETENSORS_INDEX,
    SENTENCEPIECE_FILE,
    CheckpointError,
    NllbConfig,
    check_weights,
    convert_bin,
    open_checkpoint,
    read_weight_map,
    safetensors_name,
    weight_files,
)

# report(done, total, what): bytes copied, converted or downloaded so far
Report = Callable[[int, int, str], None]
ShouldStop = Callable[[], bool]

# Weights in formats the engine does not read: never copied into an installed model.
FOREIGN_WEIGHTS = (".bin", ".h5", ".msgpack", ".onnx", ".ot", ".pt", ".pth", ".ckpt", ".safetensors")
COPY_CHUNK = 16 << 20
DOWNLOAD_CHUNK = 1 << 20


class Cancelled(Exception):
    """The user cancelled an import or a download."""


class OfflineError(Exception):
    """The Hugging Face hub cannot be reached."""


@dataclass(frozen=True)
class InstalledModel:
    name: str
    path: Path
    size_bytes: int

    @property
    def label(self) -> str:
        return f"{self.name} ({format_size(self.size_bytes)})"


def format_size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


# -- checking a folder ---------------------------------------------------------------------------------


def check_checkpoint(folder: str | Path) -> NllbConfig:
    """The folder's config if it is a usable NLLB checkpoint, else CheckpointError naming the file and the problem."""
    return open_checkpoint(folder).config


# -- installed models ----------------------------------------------------------------------------------


def list_models(models_dir: Path) -> list[InstalledModel]:
    """The installed models, by name (hidden staging folders are not models)."""
    if not models_dir.is_dir():
        return []
    models = []
    for folder in sorted(models_dir.iterdir(), key=lambda p: p.name.casefold()):
        if folder.name.startswith(".") or not (folder / "config.json").is_file():
            continue
        size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
        models.append(InstalledModel(folder.name, folder, size))
    return models


def find_model(given: str, models_dir: Path) -> Path:
    """A model named on the command line: a checkpoint folder, or the name of an installed model.
    Raises CheckpointError saying which models are installed when it is neither."""
    folder = Path(given).expanduser()
    if folder.is_dir():
        return folder
    installed = list_models(models_dir)
    for model in installed:
        if model.name == given:
            return model.path
    names = ", ".join(m.name for m in installed) or "none; add one with `dragoman models import DIR`"
    raise CheckpointError(f"{given}: neither a model folder nor an installed model (installed: {names})")


def model_in_use(model_dir: str, models_dir: Path) -> Path:
    """The model to use when none is named: the window's (Settings.model_dir), else the only one
    installed. Raises CheckpointError when there is none to choose or several."""
    if model_dir:
        return Path(model_dir)
    installed = list_models(models_dir)
    if len(installed) == 1:
        return installed[0].path
    if not installed:
        raise CheckpointError("no model installed: add one with `dragoman models import DIR` or "
                              "`dragoman models download REPO`, or name a checkpoint folder with --model")
    raise CheckpointError(f"{len(installed)} models are installed: choose one with --model NAME "
                          f"({', '.join(m.name for m in installed)})")


def remove_model(model: InstalledModel, models_dir: Path) -> None:
    if model.path.parent.resolve() != models_dir.resolve():
        raise ValueError(f"{model.path} is not an installed model")
    shutil.rmtree(model.path)


def model_name_for(source: Path) -> str:
    """A name for an imported folder: its own name, or the repository's for a Hugging Face cache snapshot."""
    source = source.resolve()
    if source.parent.name == "snapshots" and source.parent.parent.name.startswith("models--"):
        return source.parent.parent.name.split("--")[-1]
    return source.name


def _free_name(models_dir: Path, name: str) -> str:
    candidate, n = name, 2
    while (models_dir / candidate).exists():
        candidate, n = f"{name}-{n}", n + 1
    return candidate


def import_model(
    source: str | Path,
    models_dir: Path,
    report: Report | None = None,
    should_stop: ShouldStop | None = None,
    name: str | None = None,
) -> InstalledModel:
    """Copy a checkpoint folder into `models_dir`, converting `.bin` weights to safetensors.

    Raises CheckpointError (the folder is not a usable NLLB checkpoint; nothing is installed) or
    Cancelled. The model appears under its final name only once complete.
    """
    source = Path(source)
    config = check_checkpoint(source)
    shards = weight_files(source)
    models_dir.mkdir(parents=True, exist_ok=True)
    name = _free_name(models_dir, name or model_name_for(source))
    staging = Path(tempfile.mkdtemp(prefix=f".import-{name}-", dir=models_dir))
    try:
        _stage(source, shards, staging, report or (lambda *_: None), should_stop or (lambda: False))
        try:
            check_weights(staging, config)
        except CheckpointError as e:
            raise CheckpointError(f"{source}: {e}") from None
        target = models_dir / _free_name(models_dir, name)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return next(m for m in list_models(models_dir) if m.path == target)


def _stage(source: Path, shards: list[Path], staging: Path, report: Report, should_stop: ShouldStop) -> None:
    others = [
        f
        for f in sorted(source.iterdir())
        if f.is_file() and not f.name.startswith(".") and not f.name.endswith(FOREIGN_WEIGHTS)
        and f.name not in (SAFETENSORS_INDEX, PYTORCH_BIN_INDEX)
    ]
    total = sum(f.stat().st_size for f in shards + others)
    done = 0
    for f in others:
        shutil.copyfile(f, staging / f.name)
        done += f.stat().st_size
    converted: dict[str, str] = {}  # shard name in the source -> its safetensors name
    for shard in shards:
        if should_stop():
            raise Cancelled()
        if shard.suffix == ".safetensors":
            report(done, total, f"Copying {shard.name}")
            done = _copy_with_progress(shard, staging / shard.name, done, total, report, should_stop)
            converted[shard.name] = shard.name
        else:
            target = safetensors_name(shard.name, len(shards))
            report(done, total, f"Converting {shard.name} to safetensors")
            convert_bin(shard, staging / target)
            converted[shard.name] = target
            done += shard.stat().st_size
        report(done, total, "")
    for index_name in (SAFETENSORS_INDEX, PYTORCH_BIN_INDEX):
        if (source / index_name).is_file():
            weight_map = {k: converted[v] for k, v in read_weight_map(source / index_name).items()}
            (staging / SAFETENSORS_INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=2))
            break


def _copy_with_progress(src: Path, dst: Path, done: int, total: int, report: Report, should_stop: ShouldStop) -> int:
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(COPY_CHUNK):
            if should_stop():
                raise Cancelled()
            fout.write(chunk)
            done += len(chunk)
            report(done, total, f"Copying {src.name}")
    return done


# -- downloading from the Hugging Face hub -----------------------------------------------------------


@dataclass(frozen=True)
class CatalogEntry:
    repo_id: str
    title: str
    approx_bytes: int  # shown before the hub is asked; the real size replaces it


CATALOG = (
    CatalogEntry("facebook/nllb-200-distilled-600M", "NLLB-200 distilled, 600M parameters (fast, good)", 2_460_000_000),
    CatalogEntry("facebook/nllb-200-distilled-1.3B", "NLLB-200 distilled, 1.3B parameters (better)", 5_480_000_000),
    CatalogEntry("facebook/nllb-200-1.3B", "NLLB-200, 1.3B parameters", 5_480_000_000),
    CatalogEntry("facebook/nllb-200-3.3B", "NLLB-200, 3.3B parameters (best, needs a large GPU)", 17_600_000_000),
)
# Besides the weights, what an NLLB checkpoint needs (the tokenizer JSON files are not used by us).
WANTED_FILES = (
    "config.json", "generation_config.json", SENTENCEPIECE_FILE, "special_tokens_map.json", "tokenizer_config.json"
)



def catalog_repo(name: str) -> str:
    """A repository as the user names it: `facebook/nllb-200-distilled-600M`, or a catalogued one by
    its last part (`nllb-200-distilled-600M`)."""
    return next((e.repo_id for e in CATALOG if name in (e.repo_id, e.repo_id.split("/")[-1])), name)


OFFLINE_MESSAGE = (
    "Dragoman could not reach the Hugging Face hub: this computer seems to be offline.\n"
    "Connect to the internet and try again (the download resumes where it stopped), or import a "
    "model folder you already have."
)


def is_offline_error(error: BaseException | None) -> bool:
    """Whether `error` (or what caused it) means the hub could not be reached at all."""
    offline_names = {
        "ConnectError", "ConnectTimeout", "NetworkError", "LocalEntryNotFoundError", "OfflineModeIsEnabled"
    }
    while error is not None:
        if isinstance(error, ConnectionError) or offline_names & {c.__name__ for c in type(error).__mro__}:
            return True
        error = error.__cause__ or error.__context__
    return False


def remote_files(repo_id: str, endpoint: str | None = None) -> list[tuple[str, int]]:
    """The files of `repo_id` Dragoman downloads, with their sizes: safetensors weights if the
    repository has them, else the .bin ones (converted after the download)."""
    from huggingface_hub import HfApi

    try:
        info = HfApi(endpoint=endpoint).model_info(repo_id, files_metadata=True)
    except Exception as e:
        if is_offline_error(e):
            raise OfflineError(OFFLINE_MESSAGE) from e
        raise
    sizes = {s.rfilename: s.size or 0 for s in info.siblings or []}
    if any(n.endswith(".safetensors") for n in sizes):
        weights = [n for n in sizes if n.endswith(".safetensors") or n == SAFETENSORS_INDEX]
    else:
        weights = [n for n in sizes if n.endswith(".bin") or n == PYTORCH_BIN_INDEX]
    return [(n, sizes[n]) for n in sorted(weights) + [n for n in WANTED_FILES if n in sizes]]


def download_model(
    repo_id: str,
    models_dir: Path,
    report: Report | None = None,
    should_stop: ShouldStop | None = None,
    endpoint: str | None = None,
) -> InstalledModel:
    """Download `repo_id` into models_dir/.downloads/, then import it (converting .bin weights).

    Each file is fetched into a `.part` file first; a cancelled or broken download keeps it, and
    the next try asks the hub only for the bytes still missing (HTTP Range). Weight files are
    checked against the hub's SHA-256. Raises OfflineError, Cancelled or CheckpointError.
    """
    report = report or (lambda *_: None)
    should_stop = should_stop or (lambda: False)
    files = remote_files(repo_id, endpoint)
    total = sum(size for _, size in files)
    staging = models_dir / ".downloads" / repo_id.replace("/", "--")
    staging.mkdir(parents=True, exist_ok=True)
    done = 0
    what = f"Downloading {repo_id}"
    for filename, _ in files:
        before = done  # what the files before this one brought
        try:
            _fetch(repo_id, filename, staging / filename, endpoint,
                   lambda have: report(before + have, total, what), should_stop)
        except (Cancelled, CheckpointError):
            raise
        except Exception as e:
            if is_offline_error(e):
                raise OfflineError(OFFLINE_MESSAGE) from e
            raise
        done += (staging / filename).stat().st_size
        report(done, total, what)
    model = import_model(staging, models_dir, report, should_stop, name=repo_id.split("/")[-1])
    shutil.rmtree(staging, ignore_errors=True)
    return model


def _fetch(repo_id: str, filename: str, dest: Path, endpoint: str | None,
           report: Callable[[int], None], should_stop: ShouldStop) -> None:
    """One file of the repository to `dest`, resuming from `dest.part`."""
    from huggingface_hub import get_hf_file_metadata, get_session, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

    url = hf_hub_url(repo_id, filename, endpoint=endpoint)
    meta = get_hf_file_metadata(url, endpoint=endpoint)
    if dest.is_file() and dest.stat().st_size == meta.size:
        report(meta.size)
        return
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    if meta.size is not None and have > meta.size:
        have = 0
    if meta.size is None or have < meta.size:
        headers = build_hf_headers()
        if have:
            headers["Range"] = f"bytes={have}-"
        with get_session().stream("GET", url, headers=headers, follow_redirects=True, timeout=30) as response:
            hf_raise_for_status(response)
            if have and response.status_code != 206:
                have = 0  # the server sent the whole file again
            with open(part, "ab" if have else "wb") as out:
                report(have)
                for chunk in response.iter_bytes(DOWNLOAD_CHUNK):
                    if should_stop():
                        raise Cancelled()
                    out.write(chunk)
                    have += len(chunk)
                    report(have)
    if meta.size is not None and part.stat().st_size != meta.size:
        raise OSError(f"{filename}: the download stopped early ({have} of {meta.size} bytes); try again to resume")
    if meta.etag and len(meta.etag) == 64:  # large (LFS) files: the etag is the file's SHA-256
        if _sha256(part) != meta.etag:
            part.unlink()
            raise CheckpointError(f"{filename}: the downloaded file is corrupt (SHA-256 mismatch); download it again")
    os.replace(part, dest)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(COPY_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
