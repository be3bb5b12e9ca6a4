"""`dragoman translate --ray` on a local Ray cluster of two CPU workers, with the tiny checkpoint: the
same outputs as without Ray, and a worker killed mid-run changes nothing and redoes nothing."""

import json
import os
import signal
import sys

import pytest
import ray

from dragoman.app.cli import main

SENTENCES = ["Hello world. How are you?", "The cat sleeps.", "Good morning.", "It is late.", "See you soon.",
             "The train leaves at noon.", "Where is the station?", "Thank you very much."]


@pytest.fixture(scope="module")
def ray_cluster():
    """One local cluster for the module (starting one takes seconds): the CLI uses it, as connected."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def translate(tiny_checkpoint, monkeypatch, capsys, tmp_path):
    """translate(*args, home=NAME) -> (exit code, stderr): `dragoman translate` with the app's folders
    (translation cache and memory) under tmp_path/home-NAME, so that no run reuses another's translations."""
    monkeypatch.setattr(sys, "stdin", None)

    def translate(*args, home):
        monkeypatch.setenv("DRAGOMAN_HOME", str(tmp_path / f"home-{home}"))
        code = main(["translate", "--model", str(tiny_checkpoint), "--device", "cpu", "--dtype", "float32",
                     "--beams", "1", "--max-length", "12", "--from", "eng_Latn", "--to", "fra_Latn",
                     *map(str, args)])
        return code, capsys.readouterr().err

    return translate


def contents(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def make_corpus(path):
    path.write_text("".join(json.dumps({"id": i, "text": s}) + "\n" for i, s in enumerate(SENTENCES)), encoding="utf-8")


def test_documents_and_a_corpus_on_ray_are_what_they_are_without_it(ray_cluster, translate, tmp_path):
    documents = tmp_path / "documents"
    (documents / "sub").mkdir(parents=True)
    (documents / "a.txt").write_text("Hello world.\n\nThe cat sleeps. It is late.\n", encoding="utf-8")
    (documents / "b.md").write_text("# Good morning\n\nSee you **soon**.\n", encoding="utf-8")
    (documents / "sub" / "c.html").write_text("<p>Where is the station?</p><p>Thank you.</p>", encoding="utf-8")
    (documents / "broken.docx").write_bytes(b"not a zip")  # named, and the others carry on
    corpus = tmp_path / "corpus.jsonl"
    make_corpus(corpus)

    code, plain_err = translate("--output-dir", tmp_path / "plain", documents, home="plain")
    assert code == 1
    code, err = translate("--ray", "--workers", 2, "--output-dir", tmp_path / "ray", documents, home="ray")
    assert code == 1 and "documents 4/4" in err
    failed = [line for line in err.splitlines() if "broken.docx" in line]
    assert failed == [line for line in plain_err.splitlines() if "broken.docx" in line] and len(failed) == 2
    assert contents(tmp_path / "ray") == contents(tmp_path / "plain") and len(contents(tmp_path / "ray")) == 3

    corpus_args = ("--corpus", "--scores", "--shard-size", 3, corpus)
    assert translate("--output-dir", tmp_path / "plain-corpus", *corpus_args, home="plain")[0] == 0
    code, err = translate("--ray", "--workers", 2, "--output-dir", tmp_path / "ray-corpus", *corpus_args, home="ray")
    assert code == 0, err
    assert "shards 3/3" in err and "workers w0" in err  # both workers had shards
    assert contents(tmp_path / "ray-corpus") == contents(tmp_path / "plain-corpus")


def test_a_worker_killed_mid_run_changes_nothing_and_redoes_nothing(ray_cluster, translate, tmp_path, monkeypatch):
    from dragoman.app.cluster import WorkerPool
    from dragoman.app.corpus.progress import RunProgress
    from dragoman.app.corpus.run import CorpusFile

    corpus = tmp_path / "corpus.jsonl"
    make_corpus(corpus)
    args = ("--corpus", "--scores", "--shard-size", 1, corpus)
    assert translate("--output-dir", tmp_path / "plain", *args, home="plain")[0] == 0

    pids = []  # each worker's process, in the order they start
    new_actor = WorkerPool.new_actor

    def new_actor_seen(self, index):
        actor = new_actor(self, index)
        pids.append(ray.get(actor.pid.remote()))
        return actor

    monkeypatch.setattr(WorkerPool, "new_actor", new_actor_seen)
    written = []  # the shards written, each time one is
    write = CorpusFile.write
    monkeypatch.setattr(CorpusFile, "write", lambda self, shard, found: written.append(shard.index) or write(self, shard, found))
    sentences = []
    done = RunProgress.done

    def done_then_kill(self, file, worker, records, count):
        """At the first shard done, the other worker (with shards queued) is killed."""
        sentences.append(count)
        done(self, file, worker, records, count)
        if len(sentences) == 1:
            os.kill(pids[1 if worker == "w0" else 0], signal.SIGKILL)

    monkeypatch.setattr(RunProgress, "done", done_then_kill)
    code, err = translate("--ray", "--workers", 2, "--output-dir", tmp_path / "ray", *args, home="ray")
    assert code == 0, err
    assert len(pids) == 3 and "1 worker replaced" in err  # replaced once
    assert sorted(written) == list(range(len(SENTENCES)))  # each shard written once: none redone
    assert sum(sentences) == 9  # the sentences of the shards done: each once (the first record has two)
    assert contents(tmp_path / "ray") == contents(tmp_path / "plain")
    assert not [p for p in (tmp_path / "ray").rglob(".*")]  # no half-written shard
