"""`dragoman [FILE ...]`: with no subcommand it opens the window, each FILE queued as a document to translate
(the desktop's "Open with"); `dragoman translate` translates from the command line; `dragoman serve` answers
the LibreTranslate and DeepL APIs on this machine (app.server); `dragoman models` imports, downloads, lists and
removes models; `dragoman adapters` lists the LoRA adapters folder; `dragoman popup` translates the
selection in the running window's popup.

Errors are one line on stderr: exit code 1, or 2 for a usage error (bad option, unknown language).
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
from pathlib import Path
from typing import Iterable, Iterator, TextIO

from dragoman.app import __version__
from dragoman.app.wording import counted, one_line

# Lines translated together: big enough to fill a batch, small enough to print progressively.
CHUNK_LINES = 256
COMMANDS = ("translate", "serve", "models", "adapters", "memory", "popup")
DOCUMENT_OPTIONS = ("pdf_as", "bilingual", "picture_as")  # the translate options handed to the document formats
DESCRIPTION = (
    "Offline translation between 200 languages (NLLB-200). With no COMMAND it opens the window, each FILE "
    "(a document or a folder of them) queued to translate as if dropped on it."
)


MODEL_HELP = "an installed model's name (dragoman models list) or an NLLB checkpoint folder"


class UsageError(Exception):
    pass


def add_window_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", metavar="MODEL", help=MODEL_HELP)
    parser.add_argument("--adapters", metavar="DIR", help="folder of LoRA adapters")
    parser.add_argument("--from", dest="src", metavar="LANG", help="source language (FLORES-200 code, e.g. eng_Latn)")
    parser.add_argument("--to", dest="tgt", metavar="LANG", help="target language (e.g. fra_Latn)")
    parser.add_argument("--device", metavar="D", help="auto, cpu, cuda or cuda:N")


def build_window_parser(sniffing: bool = False) -> argparse.ArgumentParser:
    """`dragoman [options] [FILE ...]`. Sniffing: only to find the first positional argument, so no
    --help or --version (they would act), and a bad option raises instead of exiting."""
    parser = argparse.ArgumentParser(prog="dragoman", description=DESCRIPTION, add_help=not sniffing,
                                     exit_on_error=not sniffing)
    if not sniffing:
        parser.add_argument("--version", action="version", version=f"dragoman {__version__}")
    add_window_options(parser)
    parser.add_argument("files", nargs="*", metavar="FILE", help="documents or folders to translate in the window")
    parser.set_defaults(command=None)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dragoman", description=DESCRIPTION,
                                     usage="%(prog)s [options] [FILE ...]\n       %(prog)s COMMAND ...")
    parser.add_argument("--version", action="version", version=f"dragoman {__version__}")
    add_window_options(parser)
    parser.set_defaults(files=[])
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", prog="dragoman")  # not from the usage

    translate = commands.add_parser(
        "translate",
        help="translate lines from stdin (one segment per line) to stdout",
        description="Translate stdin, one segment per line, to stdout, one translation per line.",
    )
    translate.add_argument("--from", dest="src", metavar="LANG", required=True, help="source language, e.g. eng_Latn")
    translate.add_argument("--to", dest="tgt", metavar="LANG", required=True,
                           help="target language, e.g. fra_Latn (--corpus: several, comma-separated)")
    add_engine_options(translate)
    translate.add_argument("--no-split", action="store_true",
                           help="send each stdin line to the model whole (default: sentence by sentence)")
    translate.add_argument("--output-dir", metavar="DIR", help="write translated documents here, those found in a folder "
                           "named keeping their place below it (default: beside each input)")
    translate.add_argument("--overwrite", action="store_true", help="replace translated documents that already exist")
    translate.add_argument("--pdf-as", choices=("pdf", "text"), default="pdf",
                           help="translate a PDF into a PDF with its layout (STEM.<to>.pdf, default) or into text (STEM.<to>.txt)")
    translate.add_argument("--picture-as", choices=("picture", "pdf"), default="picture",
                           help="pictures of text: a PNG of the same size (default) or a PDF of the picture with the "
                                "translation set as real text (STEM.<to>.pdf)")
    translate.add_argument("--bilingual", action="store_true",
                           help="PDF: each original page followed by its translation (STEM.<to>.bilingual.pdf)")
    translate.add_argument("--glossary", action="append", default=[], metavar="FILE",
                           help="translate terms as this glossary says (CSV/TSV: source,target[,source_lang,target_lang]; "
                                "or TBX); may be given several times")
    translate.add_argument("--no-protect", action="store_true",
                           help="let the model rewrite URLs, e-mail addresses, placeholders and numbers with units "
                                "(default: kept as written)")
    translate.add_argument("--report", metavar="FILE",
                           help="write the translations that look wrong (a loop, a length out of range, the source "
                                "given back, another language, a low score) to FILE, one JSON object a line")
    translate.add_argument("--alternatives", type=int, metavar="N",
                           help="print one JSON object per stdin line (each line translated whole): its source, "
                                "translation and score, and the N - 1 next best translations with their scores "
                                "(N at most --beams)")
    translate.add_argument("--corpus", action="store_true",
                           help="the FILEs are corpora: JSON Lines, TSV, CSV, Parquet or plain text (a record a line), "
                                "written back with a translation column per --to language (STEM.<to>.EXT)")
    translate.add_argument("--field", "--column", dest="field", default="text", metavar="NAME",
                           help="--corpus: the JSON Lines field, Parquet column or TSV/CSV column (a header's name, "
                                "or a number from 1 for a file with no header) holding the text (default: text)")
    translate.add_argument("--shard-size", type=int, metavar="N",
                           help="--corpus: write N records a file (STEM.<to>/part-00000.EXT...); a run started "
                                "again keeps the shards written and translates the rest")
    translate.add_argument("--scores", action="store_true",
                           help="--corpus: add each translation's score and doubts (<field>.<to>.score, .doubts)")
    translate.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                           help="run on a Ray cluster (default: one of this machine, started for the run), one "
                                "engine per GPU (pip install 'dragoman[ray]'); a FILE right after --ray is a file")
    translate.add_argument("--workers", type=int, metavar="N",
                           help="--ray: how many engines (default: one per GPU; on the CPU one per 4 cores)")
    translate.add_argument(
        "files", nargs="*", metavar="FILE",
        help="documents or folders to translate, each written as STEM.<to>.EXT (txt md html srt vtt ass docx pptx "
             "xlsx odt epub pdf; pictures: png jpg webp tiff, written as .png)",
    )

    serve = commands.add_parser(
        "serve",
        help="serve the LibreTranslate and DeepL APIs on this machine",
        description="A local HTTP server speaking LibreTranslate's API and DeepL's API v2, so that tools made "
        "for them translate with Dragoman. It listens on the loopback address only unless --host says otherwise.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=5000, help="port (default 5000, LibreTranslate's)")
    serve.add_argument("--api-key", dest="api_keys", action="append", default=[], metavar="KEY",
                       help="require this key (LibreTranslate's api_key, DeepL's Authorization: DeepL-Auth-Key KEY); "
                            "may be given several times")
    serve.add_argument("--cors-origin", dest="cors_origins", action="append", default=[], metavar="ORIGIN",
                       help="let web pages from ORIGIN (e.g. https://example.org, or *) call the server")
    add_engine_options(serve)

    models = commands.add_parser(
        "models",
        help="import, download, list or remove models",
        description="The installed models (NLLB-200 checkpoints in the app's data folder), shared with the window.",
    )
    model_actions = models.add_subparsers(dest="action", metavar="ACTION")
    model_actions.add_parser("list", help="the installed models, their sizes and folders (the default)")
    importing_model = model_actions.add_parser(
        "import", help="install a Hugging Face NLLB checkpoint folder (.bin weights are converted to safetensors)")
    importing_model.add_argument("folder", metavar="DIR")
    importing_model.add_argument("--name", help="install it under this name (default: the folder's)")
    downloading = model_actions.add_parser(
        "download", help="download a checkpoint from the Hugging Face hub and install it (resumes a stopped download)")
    downloading.add_argument("repo", metavar="REPO", help="e.g. facebook/nllb-200-distilled-600M")
    removing = model_actions.add_parser("remove", help="delete an installed model")
    removing.add_argument("name", metavar="NAME")

    adapters = commands.add_parser(
        "adapters",
        help="list the LoRA adapters folder",
        description="List the LoRA adapters of the adapters folder (PEFT folders: adapter_config.json + "
        "adapter_model.safetensors) with rank, targets and size, and say what is wrong with broken ones.",
    )
    adapters.add_argument("--adapters", metavar="DIR", help="folder of LoRA adapters (default: the app's)")
    adapters.add_argument("--model", metavar="MODEL", help="also check the shapes against this model (default: the app's)")

    memory = commands.add_parser(
        "memory",
        help="the translation memory: import, export or list it",
        description="The translation memory: translations reused as they are, before the model is asked. "
        "Imported TMX translations apply to their languages with every model.",
    )
    actions = memory.add_subparsers(dest="action", metavar="ACTION")
    importing = actions.add_parser("import", help="add the translations of TMX files")
    importing.add_argument("files", nargs="+", metavar="FILE.tmx")
    exporting = actions.add_parser("export", help="write the memory as a TMX file")
    exporting.add_argument("file", metavar="FILE.tmx")
    exporting.add_argument("--from", dest="src", metavar="LANG", help="only translations from this language")
    exporting.add_argument("--to", dest="tgt", metavar="LANG", help="only translations into this language")
    actions.add_parser("list", help="count the translations of each pair of languages (the default)")

    popup = commands.add_parser(
        "popup",
        help="translate the selected text in a small popup (bind it to a key)",
        description="Translate the text selected in any window (X11's primary selection), or the clipboard where "
        "there is no selection, in a small popup near the pointer, by the running Dragoman (started in the tray "
        "when none runs). Bind this command to a key in your desktop's keyboard settings.",
    )
    popup.add_argument("--clipboard", action="store_true", help="translate the clipboard, not the selection")
    popup.add_argument("--text", metavar="TEXT",
                       help="translate TEXT (e.g. \"$(wl-paste --primary)\" on Wayland, where apps cannot read the selection)")
    return parser


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """The model, device, adapter and decoding options of `translate` and `serve`."""
    parser.add_argument("--model", metavar="MODEL", help=MODEL_HELP + " (default: the window's model, or the only one installed)")
    parser.add_argument("--beams", type=int, metavar="N", help="beam size (1 = greedy; default 4)")
    parser.add_argument("--length-penalty", type=float, metavar="F", help="beam length penalty (default 1.0)")
    parser.add_argument("--max-length", type=int, metavar="N", help="max decoder length (default: the model's, 200)")
    parser.add_argument("--no-repeat-ngram-size", type=int, metavar="N", help="forbid repeating n-grams of this size")
    parser.add_argument("--repetition-penalty", type=float, metavar="F", help="penalise repeated tokens (> 1)")
    parser.add_argument("--adapters", metavar="DIR", help="folder of LoRA adapters (default: the app's)")
    parser.add_argument("--adapter", metavar="NAME", help="translate with this LoRA adapter (a subfolder of --adapters)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    parser.add_argument(
        "--dtype", default="auto", help="auto, float32, bfloat16, float16, or int8 (CPU) (default: bfloat16 on a GPU, int8 on the CPU)"
    )
    parser.add_argument(
        "--gpu-memory", type=int, metavar="MB",
        help="GPU memory for translation beyond the model's weights (default 2048; more speeds up long documents)",
    )


def decoding_overrides(args: argparse.Namespace) -> dict:
    """The decoding options given (`Translator.default_options` overrides), checked before the model loads."""
    from dragoman.engine import DecodingOptions

    overrides = {
        "num_beams": args.beams,
        "length_penalty": args.length_penalty,
        "max_length": args.max_length,
        "no_repeat_ngram_size": args.no_repeat_ngram_size,
        "repetition_penalty": args.repetition_penalty,
    }
    overrides = {name: value for name, value in overrides.items() if value is not None}
    try:  # checked before the model loads, so a typo costs nothing
        DecodingOptions(**overrides)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return overrides


def gpu_memory_bytes(args: argparse.Namespace) -> int | None:
    from dragoman.app.settings import MIN_GPU_MEMORY_MB

    if args.gpu_memory is not None and args.gpu_memory < MIN_GPU_MEMORY_MB:
        raise UsageError(f"--gpu-memory {args.gpu_memory}: at least {MIN_GPU_MEMORY_MB} MB")
    return args.gpu_memory << 20 if args.gpu_memory is not None else None


def checked_adapters_dir(args: argparse.Namespace) -> Path | None:
    """--adapters (or the app's folder when --adapter names one), --adapter checked against the model."""
    if not args.adapter and not args.adapters:
        return None
    adapters_dir = adapters_folder(args.adapters)
    if args.adapter:  # checked before the model loads too
        from dragoman.engine import check_adapter, load_config

        check_adapter(adapters_dir, args.adapter, load_config(args.model))
    return adapters_dir


def run_serve(args: argparse.Namespace) -> int:
    from dragoman.app.server import Server, serve
    from dragoman.engine import read_ahead

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: not a port (0 to 65535)")
    overrides = decoding_overrides(args)
    gpu_memory = gpu_memory_bytes(args)
    args.model = str(model_folder(args.model))
    adapters_dir = checked_adapters_dir(args)
    read_ahead(args.model, args.device)  # while torch is imported, on the server's engine thread

    def make_translator():
        return open_engine(args, adapters_dir, gpu_memory)

    server = Server(make_translator, args.adapter or "", overrides, tuple(args.api_keys), tuple(args.cors_origins))
    return serve(server, args.host, args.port)


def open_engine(args: argparse.Namespace, adapters_dir: Path | None, gpu_memory: int | None):
    """The engine the command's options name, its int8 weights kept in the app's cache folder;
    on a first launch on a GPU its kernels are compiled in another process while it translates,
    and a command that ends first says why it waits for that process at exit."""
    from dragoman.engine import Translator

    translator = Translator(args.model, device=args.device, dtype=args.dtype, adapters_dir=adapters_dir,
                            gpu_memory=gpu_memory, weights_cache=app_settings()[0].weights_cache,
                            build_kernels_apart=True)
    if translator.kernels_building():
        atexit.register(say_kernels_still_building, translator)  # before the process is joined at exit
    return translator


def say_kernels_still_building(translator) -> None:
    if translator.kernels_building():
        print("dragoman: finishing the GPU kernels for later launches (the first launch on this GPU)",
              file=sys.stderr)


def app_settings():
    from dragoman.app.settings import AppPaths, Settings

    paths = AppPaths.default()
    return paths, Settings.load(paths.settings_file)


def adapters_folder(given: str | None) -> Path:
    """--adapters, else the app's adapters folder (its setting, or the data folder's adapters/)."""
    if given:
        return Path(given).expanduser()
    paths, settings = app_settings()
    return settings.adapters_path(paths)


def model_folder(given: str | None) -> Path:
    """--model (an installed model's name or a folder), else the window's model or the only one installed."""
    from dragoman.app.models import find_model, model_in_use

    paths, settings = app_settings()
    return find_model(given, paths.models_dir) if given else model_in_use(settings.model_dir, paths.models_dir)


def run_models(args: argparse.Namespace, stdout: TextIO) -> int:
    from dragoman.app import models

    paths, settings = app_settings()
    if args.action in ("import", "download"):
        bar = ProgressBar(args.folder if args.action == "import" else args.repo, sys.stderr, unit="bytes")
        report = lambda done, total, what: bar(done, total)  # noqa: E731
        try:
            if args.action == "import":
                model = models.import_model(args.folder, paths.models_dir, report, name=args.name)
            else:
                model = models.download_model(models.catalog_repo(args.repo), paths.models_dir, report)
        except models.OfflineError as e:
            raise RuntimeError(" ".join(str(e).split("\n"))) from None
        finally:
            bar.end()
        if not settings.model_dir:  # the first model: the one the window and `translate` use
            settings.model_dir = str(model.path)
            settings.save(paths.settings_file)
        stdout.write(f"{model.name}: installed in {model.path} ({models.format_size(model.size_bytes)})\n")
    elif args.action == "remove":
        named = next((m for m in models.list_models(paths.models_dir) if m.name == args.name), None)
        if named is None:
            raise UsageError(f"{args.name}: no installed model of that name (dragoman models list)")
        models.remove_model(named, paths.models_dir)
        if Path(settings.model_dir) == named.path:
            settings.model_dir = ""
            settings.save(paths.settings_file)
        stdout.write(f"{named.name}: removed\n")
    else:
        installed = models.list_models(paths.models_dir)
        stdout.write(f"{counted(len(installed), 'model')} in {paths.models_dir}\n")
        width = max((len(m.name) for m in installed), default=0)
        for model in installed:
            mark = "  (in use)" if Path(settings.model_dir) == model.path else ""
            stdout.write(f"{model.name:<{width}}  {models.format_size(model.size_bytes):>9}{mark}\n")
    return 0


def run_adapters(args: argparse.Namespace, stdout: TextIO) -> int:
    from dragoman.app.models import format_size
    from dragoman.engine import load_config, scan_adapters

    folder = adapters_folder(args.adapters)
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder (create it and put PEFT LoRA adapter folders in it)")
    model = str(model_folder(args.model)) if args.model else app_settings()[1].model_dir
    config = load_config(model) if model and (args.model or (Path(model) / "config.json").exists()) else None
    found = scan_adapters(folder, config)
    checked = f", checked against {model}" if config is not None else ""
    stdout.write(f"{counted(len(found), 'adapter folder')} in {folder}{checked}\n")
    width = max((len(info.name) for info in found), default=0)
    for info in found:
        if info.error:
            stdout.write(f"{info.name:<{width}}  BROKEN: {info.error}\n")
            continue
        rslora = ", rsLoRA" if info.use_rslora else ""
        stdout.write(f"{info.name:<{width}}  rank {info.rank}, alpha {info.alpha:g}{rslora}  {format_size(info.size)}  "
                     f"{info.targets()}\n")
    return 0


def read_lines(stream: TextIO) -> Iterator[str]:
    """Lines of stdin without their line ends; a clear error for bytes that are not UTF-8."""
    read: Iterable[bytes | str] = stream.buffer if hasattr(stream, "buffer") else stream
    for number, raw in enumerate(read, start=1):
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"stdin line {number} is not valid UTF-8 (byte {raw[e.start]:#04x})") from None
        yield raw.rstrip("\r\n")


def chunks(lines: Iterator[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def run_translate(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    from dragoman.engine import resolve_language

    src = resolve_language(args.src)
    targets = tuple(dict.fromkeys(resolve_language(code.strip()) for code in args.tgt.split(",") if code.strip()))
    if not targets:
        raise UsageError("--to: no language")
    if len(targets) > 1 and not args.corpus:
        raise UsageError("several --to languages: only with --corpus")
    tgt = targets[0]
    check_corpus_and_ray_options(args)
    overrides = decoding_overrides(args)
    if args.alternatives is not None:
        if args.files:
            raise UsageError("--alternatives translates stdin, not documents")
        if args.alternatives < 1:
            raise UsageError(f"--alternatives {args.alternatives}: at least 1")
        if args.beams is not None and args.alternatives > args.beams:
            raise UsageError(f"--alternatives {args.alternatives}: more than the {args.beams} beams (--beams)")
    gpu_memory = gpu_memory_bytes(args)
    terms = command_line_terms(args)
    documents = bool(args.files) and not args.corpus
    # a typo costs nothing: the documents are checked, and the report refused, before the model is looked for
    jobs, refused = document_jobs(args, document_inputs(args.files), src, tgt, overrides) if documents else ([], [])
    if args.report:
        check_output_file(args.report, "--report", {
            **{job.source_path: "the document" for job in jobs}, **{Path(name): "the document" for name in refused},
            **{job.output_path: "the translation" for job in jobs}, **app_databases()})
    args.model = str(model_folder(args.model))
    from dragoman.engine import read_ahead

    # While torch is imported (open_engine); with Ray, the GPU's in its workers.
    if read_ahead(args.model, args.device, gpu=args.ray is None) and documents:
        from dragoman.app.session.document_process import DocumentProcess

        DocumentProcess.start_spare()  # the documents' own process started while the model loads
    adapters_dir = checked_adapters_dir(args)
    if args.corpus:
        return translate_corpus(args, src, targets, overrides, terms, adapters_dir, gpu_memory)
    if documents:
        if args.ray is not None:
            return run_jobs_on_ray(args, jobs, refused, worker_spec(args, terms, adapters_dir, gpu_memory))
        return run_jobs(jobs, refused, open_engine(args, adapters_dir, gpu_memory), args.report, terms)
    from dragoman.app.session.session import TranslationJob, TranslationSession

    translator = open_engine(args, adapters_dir, gpu_memory)
    pipeline = TranslationSession.open(translator, terms=terms, unusable=going_on_without)
    doubtful = []
    try:
        beams = pipeline.options(overrides).num_beams
        if args.alternatives is not None and args.alternatives > beams:
            raise UsageError(f"--alternatives {args.alternatives}: more than the {beams} beams (--beams)")
        for index, chunk in enumerate(chunks(read_lines(stdin), CHUNK_LINES)):
            result = pipeline.translate(TranslationJob(chunk, src, tgt, overrides, typed=False, adapter=args.adapter or "",
                                                       split=not args.no_split, alternatives=args.alternatives,
                                                       doubts=args.report is not None))
            if args.alternatives is not None:  # each line whole, a blank one too
                for sentence, translation, full in zip(chunk, result.translations, result.found):
                    stdout.write(alternatives_line(sentence, translation, full) + "\n")
            else:
                for line in result.lines():
                    stdout.write(line + "\n")
            stdout.flush()
            for sentence, number, translation, full, reasons in zip(result.text.sentences, result.text.line_of,
                                                                    result.translations, result.found, result.doubts):
                if reasons:
                    doubtful.append({"line": index * CHUNK_LINES + number + 1, "source": sentence,
                                     "translation": translation, "score": full.score if full else None,
                                     "reasons": reasons})
    finally:
        pipeline.close()
    report_doubts(args.report, doubtful, "stdin", quiet=True)
    return 0


def check_corpus_and_ray_options(args: argparse.Namespace) -> None:
    """The options of --corpus and --ray that make sense only together with them, and Ray installed."""
    if args.ray and Path(args.ray).exists():  # `--ray FILE ...`: a file, not the cluster's address
        args.files.insert(0, args.ray)
        args.ray = ""
    if not args.corpus:
        for given, name in ((args.shard_size is not None, "--shard-size"), (args.scores, "--scores"),
                            (args.field != "text", "--field")):
            if given:
                raise UsageError(f"{name}: only with --corpus")
    elif not args.files:
        raise UsageError("--corpus: name the corpus files")
    if args.shard_size is not None and args.shard_size < 1:
        raise UsageError(f"--shard-size {args.shard_size}: at least 1")
    if args.workers is not None and (args.ray is None or args.workers < 1):
        raise UsageError("--workers: at least 1, and only with --ray")
    if args.ray is not None:
        if args.alternatives is not None or not args.files:
            raise UsageError("--ray translates documents or corpora (FILE...), not stdin")
        from dragoman.app.cluster import import_ray

        try:
            import_ray()
        except RuntimeError as e:
            raise UsageError(str(e)) from None


def worker_spec(args: argparse.Namespace, terms, adapters_dir: Path | None, gpu_memory: int | None):
    """What --ray's workers load. On a cluster of this machine they share its translation memory
    and cache; on another cluster each machine keeps its own (this user's folders may not exist there)."""
    from dragoman.app.cluster import WorkerSpec
    from dragoman.app.settings import AppPaths

    return WorkerSpec(args.model, args.dtype, str(adapters_dir) if adapters_dir else None, gpu_memory, terms,
                      AppPaths.default() if not args.ray else None)


def translate_corpus(args, src: str, targets: tuple[str, ...], overrides: dict, terms, adapters_dir: Path | None,
                     gpu_memory: int | None) -> int:
    """--corpus (app.corpus): each file's shards translated here, or on Ray workers with --ray."""
    from dragoman.app.corpus.progress import RunProgress
    from dragoman.app.corpus.run import CorpusFile, CorpusRequest, LocalShards, run_corpus

    request = CorpusRequest(src, targets, overrides, args.adapter or "", not args.no_split, args.scores)
    output_dir = Path(args.output_dir) if args.output_dir else None
    files = [CorpusFile(Path(name), args.field, request, args.shard_size, output_dir) for name in args.files]
    for corpus in files:
        corpus.check()  # bad input (a CorpusError, one line): said before the model loads
    progress = RunProgress(sys.stderr)
    if args.ray is not None:
        from dragoman.app.cluster import WorkerPool

        pool = WorkerPool(worker_spec(args, terms, adapters_dir, gpu_memory), args.device, args.ray, args.workers,
                          progress)
        try:
            run_corpus(files, pool, progress, args.overwrite)
        finally:
            pool.close()
    else:
        from dragoman.app.session.session import TranslationSession

        pipeline = TranslationSession.open(open_engine(args, adapters_dir, gpu_memory), terms=terms,
                                           unusable=going_on_without)
        try:
            run_corpus(files, LocalShards(pipeline), progress, args.overwrite)
        finally:
            pipeline.close()
    progress.end()
    return 0


def alternatives_line(source: str, translation: str | None, full) -> str:
    """--alternatives' JSON line for one stdin line; `full`, the engine's Translation, is None for a
    translation from the memory (no score, no alternatives)."""
    import json

    others = [{"translation": t.text, "score": t.score} for t in full.alternatives] if full is not None else []
    return json.dumps({"source": source, "translation": translation, "score": full.score if full is not None else None,
                       "alternatives": others}, ensure_ascii=False)


def command_line_terms(args: argparse.Namespace):
    """The glossaries of --glossary, read before the model loads (a bad one is a usage error), and --no-protect."""
    from dragoman.app.session.glossary import GlossaryError, read_glossary
    from dragoman.app.session.terms import Terms

    try:
        glossaries = tuple(read_glossary(Path(name).expanduser()) for name in args.glossary)
    except GlossaryError as e:
        raise UsageError(f"--glossary {e}") from None
    return Terms(glossaries, protect=not args.no_protect)


def report_doubts(path: str | None, entries: list[dict], where: str, quiet: bool = False) -> None:
    """Say how many translations look wrong (unless `quiet` and no `path`: stdin translated in a
    pipe says nothing on stderr but errors); write them to `path` (JSON lines) when given."""
    import json

    from dragoman.app.documents import write_atomically

    if entries and (path or not quiet):
        hint = f": see {path}" if path else " (--report FILE lists them)"
        print(f"dragoman: {where}: {counted(len(entries), 'translation')} {'looks' if len(entries) == 1 else 'look'} wrong{hint}",
              file=sys.stderr)
    if path:
        write_atomically(Path(path), "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries).encode())


def going_on_without(unusable: str) -> None:
    """Say that the translation memory or cache file `unusable` names cannot be used (engine.DatabaseError):
    translating goes on without it."""
    print(f"dragoman: {unusable}; going on without it", file=sys.stderr)


def app_databases() -> dict[Path, str]:
    """The files of the translation memory and cache, with SQLite's journal files beside them."""
    from dragoman.app.session.jobs import CACHE_FILE
    from dragoman.app.session.translation_memory import MEMORY_FILE
    from dragoman.app.settings import AppPaths

    paths = AppPaths.default()
    found: dict[Path, str] = {}
    for database, what in ((paths.data_dir / MEMORY_FILE, "the translation memory"),
                           (paths.cache_dir / CACHE_FILE, "the translation cache")):
        found.update((Path(f"{database}{suffix}"), what) for suffix in ("", "-wal", "-shm", "-journal"))
    return found


def check_output_file(name: str, what: str, not_to_replace: dict[Path, str]) -> None:
    """UsageError, before any work, for an output file (`what`: --report, the export) that would
    replace one of `not_to_replace` (path -> what it is) or that is no place for a file: a folder,
    a device or a pipe (replaced by a regular file, as root), a folder that does not exist."""
    path = Path(name)
    if path.is_dir():
        raise UsageError(f"{what} {name}: is a folder, not a file")
    if path.exists() and not path.is_file():
        raise UsageError(f"{what} {name}: not a regular file (a device or a pipe): name a file to write")
    if not path.absolute().parent.is_dir():
        raise UsageError(f"{what} {name}: the folder {path.absolute().parent} does not exist")
    if not os.access(path.absolute().parent, os.W_OK):
        raise UsageError(f"{what} {name}: cannot write in the folder {path.absolute().parent}")
    for other, kind in not_to_replace.items():
        if path.resolve() == other.resolve() or (path.exists() and other.exists() and path.samefile(other)):
            raise UsageError(f"{what} {name}: would replace {kind} {other}")


def run_memory(args: argparse.Namespace, stdout: TextIO) -> int:
    from dragoman.app.session.jobs import open_memory
    from dragoman.engine import resolve_language

    memory = open_memory()
    try:
        if args.action == "import":
            for name in args.files:
                report = memory.import_tmx(name)
                skipped = f" ({report.skipped} in languages NLLB does not have, or empty, skipped)" if report.skipped else ""
                stdout.write(f"{name}: {counted(report.added, 'translation')} imported{skipped}\n")
        elif args.action == "export":
            src = resolve_language(args.src) if args.src else None
            tgt = resolve_language(args.tgt) if args.tgt else None
            check_output_file(args.file, "the export", app_databases())
            count = memory.export_tmx(args.file, src, tgt)
            stdout.write(f"{args.file}: {counted(count, 'translation')} exported\n")
        else:
            pairs = memory.pairs()
            stdout.write(f"{counted(sum(n for *_, n in pairs), 'translation')} in {memory.path}\n")
            for src, tgt, n in pairs:
                stdout.write(f"{src} -> {tgt}  {n}\n")
    finally:
        memory.close()
    return 0


def document_inputs(names: list[str]) -> dict[Path, Path | None]:
    """The files named, and the supported files under the folders named (recursively, sorted, hidden
    files and our own translations skipped), each with the folder named that it was found in."""
    from dragoman.app.session.jobs import find_documents

    inputs: dict[Path, Path | None] = {}
    for name in names:
        path = Path(name)
        if path.is_dir():
            found = find_documents(path)
            if not found:
                raise UsageError(f"{name}: no supported documents in this folder")
            inputs.update((file, path) for file in found if file not in inputs)
        else:
            inputs.setdefault(path, None)
    return inputs


class ProgressBar:
    """`name [#####.....] done/total sentences` (or `1.2 GB of 2.5 GB`) on one terminal line (nothing
    when stderr is not a terminal)."""

    WIDTH = 30

    def __init__(self, name: str, stream: TextIO, unit: str = "sentences"):
        self.name = name
        self.stream = stream
        self.unit = unit
        self.shown = stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        if self.shown and total:
            filled = self.WIDTH * min(done, total) // total
            bar = "#" * filled + "." * (self.WIDTH - filled)
            from dragoman.app.models import format_size

            amount = (f"{format_size(done)} of {format_size(total)}  " if self.unit == "bytes"
                      else f"{done}/{total} {self.unit}")
            self.stream.write(f"\r{self.name} [{bar}] {amount}")
            self.stream.flush()

    def end(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def translate_files(args, files: list[Path], translator, src: str, tgt: str, overrides: dict) -> int:
    """The files as if named on the command line: `document_jobs`, then `run_jobs`."""
    return run_jobs(*document_jobs(args, dict.fromkeys(files), src, tgt, overrides), translator)


def document_jobs(args, inputs: dict[Path, Path | None], src: str, tgt: str, overrides: dict) -> tuple[list, list[str]]:
    """(the jobs, the inputs refused already, each named on stderr), from `document_inputs`. Under
    --output-dir a document found in a folder named keeps its place below that folder. A clash
    `distinct_jobs` cannot resolve is a UsageError naming both files."""
    from dragoman.app.documents import DocumentError, output_path
    from dragoman.app.session.jobs import DocumentJob, distinct_jobs

    output_dir = Path(args.output_dir) if args.output_dir else None
    document_options = {name: value for name, value in vars(args).items() if name in DOCUMENT_OPTIONS}
    jobs, refused = [], []
    for path, folder in inputs.items():
        try:
            if not path.is_file():
                raise DocumentError("no such file")
            out_dir = output_dir / path.parent.relative_to(folder) if output_dir and folder else output_dir
            jobs.append(DocumentJob(path, output_path(path, tgt, out_dir, document_options), src, tgt, overrides,
                                    adapter=args.adapter or "", overwrite=args.overwrite,
                                    document_options=document_options))
        except DocumentError as e:
            print(f"dragoman: error: {path}: {e}", file=sys.stderr)
            refused.append(str(path))
    try:
        return distinct_jobs(jobs), refused
    except DocumentError as e:
        raise UsageError(str(e)) from None


def run_jobs(jobs: list, refused: list[str], translator, report_path: str | None = None, terms=None) -> int:
    """Each job in turn; a failed one is named on stderr and the others carry on. 1 if any failed
    (or was `refused` before). The doubtful translations of all go to `report_path`. `terms`: the
    glossaries and do-not-translate settings (app.session.terms.Terms)."""
    from dragoman.app.session.jobs import JobReport
    from dragoman.app.session.session import TranslationSession

    failed = list(refused)
    doubtful: list[dict] = []
    pipeline = TranslationSession.open(translator, terms=terms, unusable=going_on_without)
    try:
        for job in jobs:
            bar = ProgressBar(job.source_path.name, sys.stderr)
            report = JobReport()
            try:
                written = pipeline.translate_document(job, progress=bar, report=report)
                bar.end()
                document_written(job, written, report, doubtful)
            except KeyboardInterrupt:
                raise
            except Exception as e:  # DocumentError, a bad file the format library choked on, out of memory...
                bar.end()
                document_failed(job, one_line(e), failed)
    finally:
        pipeline.close()
    return jobs_finished(len(jobs), len(refused), failed, doubtful, report_path)


def run_jobs_on_ray(args: argparse.Namespace, jobs: list, refused: list[str], spec) -> int:
    """`run_jobs` on Ray workers (app.cluster): the same outputs, written here as each comes back."""
    from dragoman.app.cluster import WorkerPool
    from dragoman.app.corpus.progress import RunProgress
    from dragoman.app.documents import write_atomically

    failed = list(refused)
    doubtful: list[dict] = []
    ready = []
    for job in jobs:  # as translate_document refuses it, before a worker is asked
        if job.output_path.exists() and not job.overwrite:
            document_failed(job, f"{job.output_path.name} already exists (use --overwrite to replace it)", failed)
        else:
            ready.append(job)
    progress = RunProgress(sys.stderr, unit="documents")
    pool = WorkerPool(spec, args.device, args.ray, args.workers, progress)
    progress.start([1] * len(ready), len(ready))
    try:
        for number, (job, data, report, error, worker) in enumerate(pool.translate_documents(ready)):
            progress.done(number, worker, 1, report.translated)
            if data is None:
                assert error is not None  # a worker's document fails with its error
                document_failed(job, error, failed)
                continue
            job.output_path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(job.output_path, data)
            document_written(job, job.output_path, report, doubtful)
    finally:
        pool.close()
    progress.end()
    return jobs_finished(len(jobs), len(refused), failed, doubtful, args.report)


def document_written(job, written: Path, report, doubtful: list[dict]) -> None:
    """What a document's translation says: notes on stderr, its file on stdout, its doubts kept in `doubtful`."""
    if report.cached or report.remembered:  # a run stopped before, a document translated already
        kept = [f"{n} from the {where}" for n, where in ((report.remembered, "translation memory"),
                                                         (report.cached, "translation cache")) if n]
        print(f"dragoman: {job.source_path}: {counted(report.translated, 'sentence')} translated, {', '.join(kept)}",
              file=sys.stderr)
    if report.proportional:
        print(f"dragoman: {job.source_path}: formatting placed by proportion in "
              f"{counted(report.proportional, 'sentence')} (the translation lost their tags)",
              file=sys.stderr)
    for line in report.notes:  # what its reading and writing assumed (the encoding)
        print(f"dragoman: {job.source_path}: {line}", file=sys.stderr)
    print(written, file=sys.stdout)
    doubtful += [{"file": str(job.source_path), "sentence": d.sentence, "source": d.source,
                  "translation": d.translation, "score": d.score, "reasons": list(d.reasons)}
                 for d in report.doubtful]


def document_failed(job, message: str, failed: list[str]) -> None:
    print(f"dragoman: error: {job.source_path}: {message}", file=sys.stderr)
    failed.append(str(job.source_path))


def jobs_finished(jobs: int, refused: int, failed: list[str], doubtful: list[dict], report_path: str | None) -> int:
    """The doubts reported, the failures named: 1 if any."""
    report_doubts(report_path, doubtful, counted(jobs, "document"))
    if failed:
        print(f"dragoman: {len(failed)} of {jobs + refused} documents failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """argparse cannot take a subcommand and files in the same place (a file would be an unknown
    command), so the window's parser takes the command line unless its first positional argument
    is a command (a document named like one can be given as ./translate)."""
    try:
        sniffed, _ = build_window_parser(sniffing=True).parse_known_args(argv)
    except argparse.ArgumentError:
        sniffed = None  # e.g. --model without a folder: the full parser says so
    if sniffed is not None and sniffed.files and sniffed.files[0] not in COMMANDS:
        return build_window_parser().parse_intermixed_args(argv)  # options may follow the files
    return build_parser().parse_args(argv)


def command() -> None:
    """The `dragoman` command (as installed, and bundled): `main` on the process's arguments. A
    translate command then ends the process without the interpreter's teardown of every module,
    torch's among them (0.4-0.5 s after its last line); what an exit must do is done first: atexit's
    handlers (child processes joined, a kernel build waited for, logs flushed) and the standard
    streams flushed. Other commands (the window's Qt among them) exit as usual."""
    args = parse_args(None)
    code = run(args)
    if args.command == "translate" and hasattr(atexit, "_run_exitfuncs"):
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # the reader went, or the stream was closed
                pass
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    """The exit code of the command `argv` (the process's arguments if None) names."""
    return run(parse_args(argv))


def run(args: argparse.Namespace) -> int:
    try:
        if args.command == "translate":
            return run_translate(args, sys.stdin, sys.stdout)
        if args.command == "serve":
            return run_serve(args)
        if args.command == "models":
            return run_models(args, sys.stdout)
        if args.command == "adapters":
            return run_adapters(args, sys.stdout)
        if args.command == "memory":
            return run_memory(args, sys.stdout)
        if args.command == "popup":
            from dragoman.app.window.gui import run_popup

            return run_popup(args.clipboard, args.text)
        from dragoman.app.window.gui import run_window

        return run_window(model=args.model and str(model_folder(args.model)), adapters=args.adapters, src=args.src, tgt=args.tgt, device=args.device,
                          files=args.files)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1  # the reader went away (e.g. `| head`): nothing left to say
    except Exception as e:  # one clear line, never a traceback
        from dragoman.engine import UnknownLanguageError

        code = 2 if isinstance(e, (UsageError, UnknownLanguageError)) else 1
        message = one_line(e)
        print(f"dragoman: error: {message}", file=sys.stderr)
        return code


if __name__ == "__main__":
    command()
