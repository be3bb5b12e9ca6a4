import json
import subprocess
import sys


def test_a_commands_start_up_is_traced_in_its_own_order(tiny_checkpoint):
    """`python -m bench.startup_trace -- translate ...` on the CPU with the tiny test model: the
    command runs, its translation kept off the output, its imports and the engine's functions
    timed on the threads that ran them, in the order the command ran them."""
    command = [sys.executable, "-m", "bench.startup_trace", "--", "translate", "--from", "eng_Latn", "--to",
               "fra_Latn", "--model", str(tiny_checkpoint), "--device", "cpu", "--max-length", "8"]
    done = subprocess.run(command, input="The quick brown fox.\n", capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)  # the command's own output is not printed
    assert out["exit_code"] == 0 and 0 < out["first_output_s"] <= out["returned_s"]
    torch_started, torch_done = out["imports_s"]["torch"]
    assert torch_started < torch_done < out["first_output_s"]
    functions = out["functions"]
    for name in ("dragoman.engine.weights.load_weights", "dragoman.app.session.session.TranslationSession.translate"):
        assert functions[name]["calls"] >= 1 and functions[name]["seconds"] > 0, name
    # The engine's run hands the translation over before it returns: the command may end first.
    assert functions["dragoman.engine.generator.Generator.run"]["calls"] >= 1
    assert "dragoman-engine      > load_weights" in done.stderr  # on the engine's own thread
