"""Session fixtures shared by all tests."""

import os
import sys
from pathlib import Path

import pytest

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before anything imports Qt: tests run headless
# Triton picks interpreter or compiler when first imported (by `kernels`, through `engine`):
# the kernel tests run the Triton kernels on the CPU through the interpreter.
os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parent))  # test helpers such as nllb_checkpoint.py

import torch  # noqa: E402

# The test models are tiny: one thread beats several that mostly wait on each other (12x here).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """A small random NLLB checkpoint in the published Hugging Face layout (model.safetensors)."""
    from nllb_checkpoint import build_checkpoint  # imports transformers: only when needed

    return build_checkpoint(tmp_path_factory.mktemp("checkpoints") / "tiny-nllb")


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
