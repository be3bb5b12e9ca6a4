import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dragoman import kernels
from dragoman.kernels import dispatch

REPO = Path(__file__).resolve().parents[2]


def small_inputs():
    g = torch.Generator().manual_seed(0)
    k, v = torch.randn(8, 2, 8, generator=g), torch.randn(8, 2, 8, generator=g)
    table = torch.tensor([[5, 0, 2], [1, 7, -1], [3, 3, 3]], dtype=torch.int32)
    rows = torch.tensor([2, 0], dtype=torch.int32)
    lens = torch.tensor([3, 2], dtype=torch.int32)
    q = torch.randn(2, 2, 8, generator=g)
    x = torch.randn(2, 8, generator=g)
    return q, k, v, table, rows, lens, x


def test_cpu_tensors_take_the_reference():
    q, k, v, table, rows, lens, x = small_inputs()
    assert torch.equal(kernels.slot_attention(q, k, v, table, rows, lens, 0.5),
                       kernels.slot_attention_ref(q, k, v, table, rows, lens, 0.5))
    w, b = torch.ones(8), torch.zeros(8)
    for got, want in zip(kernels.add_layer_norm(x, x, w, b, 1e-5), kernels.add_layer_norm_ref(x, x, w, b, 1e-5)):
        assert torch.equal(got, want)
    for got, want in zip(kernels.logsoftmax_topk(x, 3), kernels.logsoftmax_topk_ref(x, 3)):
        assert torch.equal(got, want)
    a, b, scale = torch.randn(2, 4, 8), torch.randn(2, 8, 4), torch.ones(2)
    slots = torch.tensor([1, -1], dtype=torch.int32)
    assert torch.equal(kernels.lora(x, x.clone(), a, b, scale, slots), kernels.lora_ref(x, x.clone(), a, b, scale, slots))
    assert torch.equal(kernels.source_attention(q, k, v, table, rows, lens, 0.5, 2),
                       kernels.source_attention_ref(q, k, v, table, rows, lens, 0.5, 2))
    weight, bias = torch.randn(5, 8), torch.randn(5)
    assert torch.equal(kernels.fused_linear(x, weight, bias, relu=True), kernels.fused_linear_ref(x, weight, bias, True))
    ids = torch.tensor([1, 0])
    for got, want in zip(kernels.embed_layer_norm(ids, ids, x, 2.0, x, 0, w, w, 1e-5),
                         kernels.embed_layer_norm_ref(ids, ids, x, 2.0, x, 0, w, w, 1e-5)):
        assert torch.equal(got, want)


def test_imports_and_runs_without_triton():
    # sys.modules["triton"] = None makes `import triton` fail, as where it is not installed.
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import torch; from dragoman import kernels\n"
        "assert not kernels.HAVE_TRITON\n"
        "x = torch.randn(3, 16)\n"
        "kernels.add_layer_norm(x, x, torch.ones(16), torch.zeros(16), 1e-5)\n"
        "kernels.logsoftmax_topk(x, 2)\n"
        "slots = torch.tensor([0, -1, 1], dtype=torch.int32)\n"
        "kernels.lora(x, x.clone(), torch.randn(2, 4, 16), torch.randn(2, 16, 4), torch.ones(2), slots)\n"
        "kernels.fused_linear(x, torch.randn(4, 16), None, relu=True)\n"
        "from dragoman.engine.constrained_search import ConstraintTables, constrained_step\n"
        "from dragoman.engine.constraints import Constraints\n"
        "from dragoman.engine.decoding import DecodingOptions\n"
        "from dragoman.engine.rows import DecoderRows\n"
        "state = DecoderRows(4, 8, 4, torch.device('cpu')); state.kv_len[:4] = 1\n"
        "tables = ConstraintTables.build([Constraints([[5, 6]], 2)], torch.device('cpu'))\n"
        "constrained_step(state, torch.arange(4).view(1, 4), torch.randn(4, 40), DecodingOptions(num_beams=4),"
        " 2, 8, None, tables)\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


@pytest.mark.skipif(torch.version.cuda is not None or torch.version.hip is not None,
                    reason="a GPU build of torch: whether triton is imported depends on the machine's driver")
def test_a_cpu_build_of_torch_never_imports_triton(tmp_path):
    # Installed or not, triton could run no kernel with a CPU build of torch: the engine starts
    # without importing it, and translates on the references.
    code = (
        "import sys, torch\n"
        "from dragoman import kernels\n"
        "from dragoman.app import cli\n"
        "from dragoman.engine import translator\n"
        "assert not kernels.HAVE_TRITON and 'triton' not in sys.modules, sorted(m for m in sys.modules if 'triton' in m)\n"
        "x = torch.randn(3, 16)\n"
        "assert torch.equal(kernels.logsoftmax_topk(x, 2)[1], kernels.logsoftmax_topk_ref(x, 2)[1])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True)


@pytest.fixture
def as_on_a_gpu(monkeypatch):
    """CPU tensors take the Triton path (run by the interpreter, tests/kernels/conftest.py), with
    the kernels' failure state as at the start of a process."""
    monkeypatch.setattr(dispatch, "_on_gpu", lambda tensor: True)
    monkeypatch.setattr(dispatch, "_unavailable", None)


@pytest.fixture
def failing_launches(monkeypatch):
    """Every Triton launch fails as where Triton finds no C compiler to build its launchers with;
    returns the list of launches tried."""
    import triton.runtime.interpreter
    import triton.runtime.jit

    tried = []

    def fail(self, *args, **kwargs):
        tried.append(self)
        raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.\nmore detail")

    for kind in (triton.runtime.jit.JITFunction, triton.runtime.interpreter.InterpretedFunction):
        monkeypatch.setattr(kind, "run", fail)
    return tried


def test_on_a_gpu_the_triton_kernel_runs(as_on_a_gpu):
    x, weight = torch.randn(2, 64), torch.randn(16, 64)
    out = kernels.fused_linear(x, weight)
    torch.testing.assert_close(out, kernels.fused_linear_ref(x, weight))
    assert kernels.unavailable_message() is None and not kernels.triton_failed()


def test_a_kernel_that_fails_falls_back_to_its_reference_for_good_saying_so_once(as_on_a_gpu, failing_launches,
                                                                                    caplog):
    q, k, v, table, rows, lens, x = small_inputs()
    weight, bias = torch.randn(5, 8), torch.randn(5)
    with caplog.at_level("WARNING", logger="dragoman.kernels"):
        assert torch.equal(kernels.fused_linear(x, weight, bias), kernels.fused_linear_ref(x, weight, bias))
        assert torch.equal(kernels.slot_attention(q, k, v, table, rows, lens, 0.5),
                           kernels.slot_attention_ref(q, k, v, table, rows, lens, 0.5))
        kernels.fused_linear(x, weight, bias)
    assert len(failing_launches) == 1  # the kernels after the first failure are not tried
    message = "GPU kernels unavailable: RuntimeError: Failed to find C compiler. Please specify via CC environment " \
              "variable.; using the slower PyTorch path"
    assert kernels.unavailable_message() == message and kernels.triton_failed()
    assert [r.getMessage() for r in caplog.records] == [message]


def test_a_failed_assertion_is_the_caller_s_and_is_raised(as_on_a_gpu):
    x = torch.randn(2, 64)
    with pytest.raises(AssertionError):
        kernels.fused_linear(x, torch.randn(16, 64).half())  # K differs: a mistake, not a Triton failure
    assert kernels.unavailable_message() is None
