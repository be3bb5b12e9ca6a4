"""engine/lean_torch.py: torch imported through the engine's front door, its compiler's modules
deferred until something needs them. Each case runs in a fresh interpreter: this one imported torch
at its start (tests/conftest.py), as `install` then leaves it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def run_fresh(code: str, imports: str = "import dragoman.engine\nimport torch") -> dict:
    """`code` run after `imports` (by default the engine's front door, which installs the deferral,
    then torch), in a new interpreter from the checkout; it assigns `out`, which comes back."""
    script = f"import json, sys\n{imports}\n" + textwrap.dedent(code) + "\nprint(json.dumps(out))\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def decomposition_counts() -> dict:
    import torch._decomp

    return {kind: len(table) for kind, table in torch._decomp.global_decomposition_table.items()}


def test_torch_is_imported_without_its_compiler_modules_and_they_come_whole_on_first_use():
    out = run_fresh("""
        from dragoman.engine import lean_torch
        deferred = lean_torch.deferred()
        unloaded = [n for n in ("torch._decomp", "torch._prims", "torch._refs") if n not in sys.modules]
        dim = torch.export.Dim("rows").__class__.__name__  # an attribute of a stand-in
        import torch._decomp
        out = {"deferred": deferred, "unloaded": unloaded, "after": lean_torch.deferred(), "dim": dim,
               "export_real": hasattr(torch.export, "__file__"),
               "decompositions": {k: len(t) for k, t in torch._decomp.global_decomposition_table.items()},
               "meta": list(torch.empty(3, 4, device="meta").logsumexp(1).shape)}
    """)
    assert out["deferred"] == ["torch._meta_registrations", "torch.export"]
    assert out["unloaded"] == ["torch._decomp", "torch._prims", "torch._refs"]
    assert out["after"] == [] and out["export_real"]
    assert out["dim"] == type(torch.export.Dim("rows")).__name__
    # Each module ran once, its registrations where everything reads them, as in a plain import.
    assert out["decompositions"] == decomposition_counts()
    assert out["meta"] == [3]


def test_importing_a_module_of_the_compiler_first_imports_the_deferred_ones_once():
    out = run_fresh("""
        from dragoman.engine import lean_torch
        import torch._decomp.decompositions  # imported by the real ones too: run once
        from torch.export.dynamic_shapes import Dim
        out = {"after": lean_torch.deferred(), "same": sys.modules["torch._decomp"] is torch._decomp,
               "decompositions": {k: len(t) for k, t in torch._decomp.global_decomposition_table.items()},
               "dim": Dim is torch.export.Dim}
    """)
    assert out == {"after": [], "same": True, "decompositions": decomposition_counts(), "dim": True}


def test_torch_compile_traces_with_the_real_modules():
    out = run_fresh("""
        from dragoman.engine import lean_torch
        before = lean_torch.deferred()
        twice = torch.compile(lambda x: torch.nn.functional.gelu(x) * 2, backend="aot_eager")
        x = torch.randn(3, 5)
        out = {"before": before, "after": lean_torch.deferred(),
               "same": torch.equal(twice(x), torch.nn.functional.gelu(x) * 2)}
    """)
    assert out == {"before": ["torch._meta_registrations", "torch.export"], "after": [], "same": True}


def test_realize_gives_meta_tensors_their_kernels():
    out = run_fresh("""
        from dragoman.engine import lean_torch
        lean_torch.realize()
        out = {"after": lean_torch.deferred(), "shape": list(torch.empty(3, 4, device="meta").logsumexp(1).shape)}
    """)
    assert out == {"after": [], "shape": [3]}


def test_nothing_is_deferred_where_torch_was_imported_first():
    out = run_fresh("""
        from dragoman.engine import lean_torch
        out = {"deferred": lean_torch.deferred(), "export_real": hasattr(torch.export, "__file__")}
    """, imports="import torch\nimport dragoman.engine")
    assert out == {"deferred": [], "export_real": True}


def test_the_engine_translates_under_the_lean_import_as_under_a_plain_one(tiny_checkpoint, translator):
    texts = ["The quick brown fox jumps over the lazy dog.", "Hello world, how are you today?"]
    out = run_fresh(f"""
        from dragoman.engine import Translator, lean_torch
        from dragoman.engine.memory import CPU_ROWS
        torch.set_num_threads(1)  # as tests/conftest.py: sums in the same order as here
        engine = Translator({str(tiny_checkpoint)!r}, device="cpu", dtype="float32", max_rows=CPU_ROWS)
        found = engine.translate_full({texts!r}, "eng_Latn", "fra_Latn")
        out = {{"deferred": lean_torch.deferred(), "texts": [t.text for t in found], "scores": [t.score for t in found]}}
    """)
    assert out["deferred"] == ["torch._meta_registrations", "torch.export"]  # the engine needed neither
    here = translator.translate_full(texts, "eng_Latn", "fra_Latn")
    assert out["texts"] == [t.text for t in here]
    assert out["scores"] == [t.score for t in here]
