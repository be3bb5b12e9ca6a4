"""Session fixtures shared by all tests."""

import os
import sys
from pathlib import Path

import pytest

import dragoman  # noqa: F401  first: the checkout's folders must not shadow installed `kernels` (transformers)

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before anything imports Qt: tests run headless
# Triton picks interpreter or compiler when first imported (by `kernels`, through `engine`):
# the kernel tests run the Triton kernels on the CPU through the interpreter.
os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parent))  # test helpers such as nllb_checkpoint.py
# The app tests' shared fakes (documents.document_fakes), for a test outside tests/app run alone.
sys.path.append(str(Path(__file__).parent / "app"))

import torch  # noqa: E402

# The test models are tiny: one thread beats several that mostly wait on each other (12x here).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """A small random NLLB checkpoint in the published Hugging Face layout (model.safetensors)."""
    from nllb_checkpoint import build_checkpoint  # imports transformers: only when needed

    return build_checkpoint(tmp_path_factory.mktemp("checkpoints") / "tiny-nllb")


@pytest.fixture(scope="session")
def bin_checkpoint(tmp_path_factory) -> Path:
    """tiny_checkpoint's model with its weights in pytorch_model.bin, every key as published."""
    from nllb_checkpoint import build_checkpoint

    return build_checkpoint(tmp_path_factory.mktemp("checkpoints") / "tiny-nllb-bin", weights="bin")


@pytest.fixture(scope="session")
def sharded_checkpoint(tmp_path_factory) -> Path:
    """tiny_checkpoint's model with its weights in two safetensors shards and their index."""
    from nllb_checkpoint import build_checkpoint

    return build_checkpoint(tmp_path_factory.mktemp("checkpoints") / "tiny-nllb-sharded", weights="sharded")


@pytest.fixture(scope="session")
def hf_model(tiny_checkpoint):
    """transformers' model of tiny_checkpoint in float32: the oracle for decoding."""
    from transformers import M2M100ForConditionalGeneration

    return M2M100ForConditionalGeneration.from_pretrained(tiny_checkpoint, dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def hf_tokenizer(tiny_checkpoint):
    """transformers' NllbTokenizer for tiny_checkpoint: the oracle for engine.tokenizer."""
    from transformers import NllbTokenizer

    return NllbTokenizer.from_pretrained(tiny_checkpoint)


@pytest.fixture(scope="session")
def peft_adapters(tiny_checkpoint, tmp_path_factory):
    """(folder, {name: PEFT model}): PEFT LoRA adapters of tiny_checkpoint, one per subfolder."""
    from peft_adapters import make_adapters  # imports peft: only when needed

    folder = tmp_path_factory.mktemp("adapters")
    return folder, make_adapters(tiny_checkpoint, folder)


@pytest.fixture
def make_translator(tiny_checkpoint):
    """make_translator(**options): a new engine of tiny_checkpoint, on the CPU in float32 unless told,
    for a test that changes it or needs one of its own."""
    from dragoman.engine.translator import Translator

    def make_translator(device="cpu", dtype="float32", **options):
        return Translator(tiny_checkpoint, device=device, dtype=dtype, **options)

    return make_translator


@pytest.fixture(scope="module")
def translator(tiny_checkpoint):
    """The engine of tiny_checkpoint on the CPU in float32, shared by a module's tests: a test may
    change it only through monkeypatch, which puts it back. Its steps have a published model's rows
    (CPU_ROWS; the small model would get more, engine/memory.py plan_cpu), so that a few dozen
    sentences decode in several waves, as a document's do on a user's machine."""
    from dragoman.engine.memory import CPU_ROWS
    from dragoman.engine.translator import Translator

    return Translator(tiny_checkpoint, device="cpu", dtype="float32", max_rows=CPU_ROWS)


@pytest.fixture(scope="module")
def tag_translator(tmp_path_factory):
    """An engine of a tiny random checkpoint like tiny_checkpoint whose vocabulary can write the
    placeholder tags (tiny_checkpoint's has no `<`): a quarter of its training sentences have one."""
    import random

    import nllb_checkpoint
    from dragoman.engine.translator import Translator

    plain = nllb_checkpoint.training_sentences

    def with_tags(count: int = 4000, seed: int = 1234) -> list[str]:
        sentences, rng = plain(count, seed), random.Random(seed)
        for i in range(0, len(sentences), 4):
            words = sentences[i].split(" ")
            k, n = rng.randrange(len(words)), rng.randint(1, 3)
            words[k] = f"<x{n}>{words[k]}</x{n}>" if rng.random() < 0.7 else f"{words[k]} <x{n}/>"
            sentences[i] = " ".join(words)
        return sentences

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nllb_checkpoint, "training_sentences", with_tags)
        checkpoint = nllb_checkpoint.build_checkpoint(tmp_path_factory.mktemp("checkpoints") / "tiny-tags")
    return Translator(checkpoint, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def lora_translator(tiny_checkpoint, peft_adapters):
    """`translator` with peft_adapters' folder as its adapters, shared by a module's tests."""
    from dragoman.engine.translator import Translator

    return Translator(tiny_checkpoint, device="cpu", dtype="float32", adapters_dir=peft_adapters[0])


@pytest.fixture
def gpu_profile(monkeypatch):
    """gpu_profile(name): the GPU of that profile (kernels/gpu_profile.py) as DRAGOMAN_GPU_PROFILE
    emulates one, with the per-process cache emptied; no GPU is asked. Gives the device to plan for."""
    from dragoman.kernels import gpu_profile as profile

    monkeypatch.setattr(profile, "_profiles", {})

    def name(value):
        monkeypatch.setenv(profile.PROFILE_VARIABLE, value)
        profile._profiles.clear()  # read once per process otherwise
        return torch.device("cuda", 0)

    return name
