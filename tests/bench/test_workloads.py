import argparse
import random

import pytest

from bench.__main__ import EOS, add_workload_arguments, workload


def test_the_workloads_are_those_of_the_design():
    [typed], beams, new_tokens = workload("interactive", 512, random.Random(1))
    assert (len(typed), beams, new_tokens) == (32, 4, 32) and typed[-1] == EOS
    for name, expected_beams in (("document", 4), ("greedy", 1)):
        sources, beams, new_tokens = workload(name, 512, random.Random(1))
        assert (len(sources), beams, new_tokens) == (512, expected_beams, 40)
        assert all(10 <= len(s) <= 60 and s[-1] == EOS for s in sources)
    assert workload("greedy", 512, random.Random(1))[0] == workload("document", 512, random.Random(1))[0]


def test_the_gpu_tools_take_the_workloads_by_name():
    parser = argparse.ArgumentParser()
    add_workload_arguments(parser, workload="greedy", batch=512)
    args = parser.parse_args([])
    assert (args.size, args.workload, args.batch) == ("600M", "greedy", 512)
    assert parser.parse_args(["--workload", "document", "--batch", "64"]).batch == 64
    with pytest.raises(SystemExit):
        parser.parse_args(["--workload", "novel"])


def test_the_app_path_benchmark_writes_distinct_sentences_of_words():
    from bench.documents import document_sentences

    sentences = document_sentences(500, seed=3)
    assert len(set(sentences)) == 500  # the app translates each distinct sentence once
    assert all(s[0].isupper() and s.endswith(".") and 4 <= len(s.split()) <= 10 for s in sentences)
    assert document_sentences(500, seed=3) == sentences != document_sentences(500, seed=4)
