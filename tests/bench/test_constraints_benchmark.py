"""bench/constraints.py on the CPU with the tiny checkpoint (named apart from tests/engine/test_constraints.py,
which pytest would otherwise take for the same module)."""

import json

from bench.constraints import main


def test_the_constraints_benchmark_runs_every_workload_and_writes_its_json(tiny_checkpoint, tmp_path):
    out = main(["--checkpoint", str(tiny_checkpoint), "--device", "cpu", "--dtype", "float32", "--out", str(tmp_path),
                "--sentences", "6", "--doc-repeats", "1", "--repeats", "1", "--new-tokens", "12"])
    assert json.loads((tmp_path / "constraints.json").read_text()) == out
    for count in (0, 1, 3):
        assert out[f"document_beam4_{count}_constraints_sent_per_s"] > 0
    assert out["document_beam4_1_constraint_every_10th_sentence_sent_per_s"] > 0
    assert out["interactive_beam4_plain_ms_median"] > 0 and out["interactive_beam4_glossary_2_terms_ms_median"] > 0
