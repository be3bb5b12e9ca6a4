"""`dragoman translate --corpus` without Ray, with the real engine on the tiny checkpoint: each format,
several targets, shards, a run started again, bad input."""

import csv
import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dragoman.app.cli import main

SENTENCES = ["Hello world. How are you?", "The cat sleeps.", "Good morning.", "It is late.", "See you soon."]


@pytest.fixture
def translate(tiny_checkpoint, monkeypatch, capsys):
    """translate(*args) -> (exit code, stdout, stderr) of `dragoman translate` on the tiny checkpoint."""
    monkeypatch.setattr(sys, "stdin", None)

    def translate(*args, to="fra_Latn"):
        code = main(["translate", "--model", str(tiny_checkpoint), "--device", "cpu", "--dtype", "float32",
                     "--beams", "1", "--max-length", "12", "--from", "eng_Latn", "--to", to, *map(str, args)])
        out, err = capsys.readouterr()
        return code, out, err

    return translate


@pytest.fixture
def stdin_translations(translate, monkeypatch, tmp_path):
    """{target: {sentence: translation}} of SENTENCES as `dragoman translate` gives them on stdin."""
    found = {}
    for target in ("fra_Latn", "deu_Latn"):
        source = tmp_path / "stdin.txt"
        source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
        with open(source, encoding="utf-8") as f:
            monkeypatch.setattr(sys, "stdin", f)
            code, out, _ = translate(to=target)
        assert code == 0
        found[target] = dict(zip(SENTENCES, out.splitlines()))
    return found


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_jsonl_into_two_languages_with_scores_as_stdin_translates_them(translate, stdin_translations, tmp_path):
    records = [{"id": i, "text": s, "meta": {"n": i}} for i, s in enumerate(SENTENCES)] + [{"id": 9, "text": None}]
    corpus = tmp_path / "corpus.jsonl"
    write_jsonl(corpus, records)
    before = corpus.read_bytes()
    code, _, err = translate("--corpus", "--scores", corpus, to="fra_Latn,deu_Latn")
    assert code == 0, err
    assert err.count("\n") == 1 and "shards 1/1" in err  # one summary line: stderr is not a terminal
    out = read_jsonl(tmp_path / "corpus.translated.jsonl")
    assert corpus.read_bytes() == before
    assert [{k: r[k] for k in ("id", "text", "meta") if k in r} for r in out] == records  # same records, same order
    assert list(out[0]) == ["id", "text", "meta", "text.fra_Latn", "text.fra_Latn.score", "text.fra_Latn.doubts",
                            "text.deu_Latn", "text.deu_Latn.score", "text.deu_Latn.doubts"]
    for record in out[:-1]:
        for target in ("fra_Latn", "deu_Latn"):
            assert record[f"text.{target}"] == stdin_translations[target][record["text"]]
            assert isinstance(record[f"text.{target}.score"], float)
            assert isinstance(record[f"text.{target}.doubts"], list)
    assert out[-1]["text.fra_Latn"] is None and out[-1]["text.fra_Latn.score"] is None


def test_tsv_csv_parquet_and_text_in_shards(translate, stdin_translations, tmp_path):
    french = stdin_translations["fra_Latn"]
    (tmp_path / "named.tsv").write_text("id\ttext\n" + "".join(f"{i}\t{s}\n" for i, s in enumerate(SENTENCES)),
                                        encoding="utf-8")
    (tmp_path / "numbered.tsv").write_text("".join(f"{i}\t{s}\n" for i, s in enumerate(SENTENCES)), encoding="utf-8")
    with open(tmp_path / "quoted.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["sentence", "note"], *([s, 'a "quoted", note'] for s in SENTENCES)])
    pq.write_table(pa.table({"id": list(range(5)), "text": SENTENCES}), tmp_path / "table.parquet")
    (tmp_path / "lines.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")

    assert translate("--corpus", "--column", "text", "--shard-size", 2, tmp_path / "named.tsv")[0] == 0
    assert translate("--corpus", "--column", "2", tmp_path / "numbered.tsv")[0] == 0
    assert translate("--corpus", "--column", "sentence", "--scores", tmp_path / "quoted.csv")[0] == 0
    assert translate("--corpus", "--shard-size", 2, "--scores", tmp_path / "table.parquet")[0] == 0
    assert translate("--corpus", "--shard-size", 3, tmp_path / "lines.txt", to="fra_Latn,deu_Latn")[0] == 0

    shards = sorted((tmp_path / "named.fra_Latn").glob("part-*.tsv"))
    assert [p.name for p in shards] == ["part-00000.tsv", "part-00001.tsv", "part-00002.tsv"]
    rows = [line.split("\t") for p in shards for line in p.read_text(encoding="utf-8").splitlines()]
    assert rows[0] == ["id", "text", "text.fra_Latn"] and len(rows) == 3 + 5  # each shard with its header
    assert [r[2] for r in rows if r[0] != "id"] == [french[s] for s in SENTENCES]

    rows = [line.split("\t") for line in (tmp_path / "numbered.fra_Latn.tsv").read_text(encoding="utf-8").splitlines()]
    assert rows == [[str(i), s, french[s]] for i, s in enumerate(SENTENCES)]  # no header added

    with open(tmp_path / "quoted.fra_Latn.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["sentence", "note", "sentence.fra_Latn", "sentence.fra_Latn.score", "sentence.fra_Latn.doubts"]
    assert [r[:3] for r in rows[1:]] == [[s, 'a "quoted", note', french[s]] for s in SENTENCES]

    parts = sorted((tmp_path / "table.fra_Latn").glob("part-*.parquet"))
    table = pa.concat_tables(pq.read_table(p) for p in parts)
    assert len(parts) == 3 and table.column("id").to_pylist() == list(range(5))
    assert table.column("text.fra_Latn").to_pylist() == [french[s] for s in SENTENCES]
    assert table.schema.field("text.fra_Latn.score").type == pa.float64()

    for target in ("fra_Latn", "deu_Latn"):  # plain text: one output per language
        lines = "".join(p.read_text(encoding="utf-8") for p in sorted((tmp_path / f"lines.{target}").glob("part-*")))
        assert lines.splitlines() == [stdin_translations[target][s] for s in SENTENCES]


def test_a_run_started_again_keeps_finished_shards(translate, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    write_jsonl(corpus, [{"text": s} for s in SENTENCES])
    assert translate("--corpus", "--shard-size", 2, corpus)[0] == 0
    folder = tmp_path / "corpus.fra_Latn"
    shards = sorted(folder.glob("part-*.jsonl"))
    first = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in shards}
    shards[1].unlink()  # as if the run had been stopped before it
    code, _, err = translate("--corpus", "--shard-size", 2, corpus)
    assert code == 0 and "shards 3/3 (2 done before)" in err
    again = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.glob("part-*"))}
    assert again[shards[0].name] == first[shards[0].name] and again[shards[2].name] == first[shards[2].name]
    assert again[shards[1].name][2] == first[shards[1].name][2]  # the same translations, written once more
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporaries left

    code, _, err = translate("--corpus", "--shard-size", 3, corpus)  # other shards: not mixed with those
    assert code == 1 and "--overwrite" in err and "corpus.fra_Latn" in err
    assert translate("--corpus", "--shard-size", 3, "--overwrite", corpus)[0] == 0
    assert len(list(folder.glob("part-*"))) == 2


@pytest.mark.parametrize(("name", "content", "options", "message"), [
    ("bad.jsonl", '{"text": "a"}\n{"text": "b"}\n{"text": "c",\n', [], "bad.jsonl line 3: not valid JSON"),
    ("field.jsonl", '{"text": "a"}\n{"body": "b"}\n', [], 'field.jsonl line 2: no field "text"'),
    ("number.jsonl", '{"text": 5}\n', [], 'number.jsonl line 1: field "text" is int, not text'),
    ("column.tsv", "id\tbody\n1\ta\n", ["--column", "text"], 'column.tsv line 1: no column "text" in the header'),
    ("short.tsv", "a\tb\nc\n", ["--column", "2"], "short.tsv line 2: 1 columns, no column 2"),
    ("scores.txt", "a\n", ["--scores"], "scores.txt: plain text has no room for --scores"),
])
def test_bad_input_is_one_line_naming_file_and_place(translate, tmp_path, name, content, options, message):
    (tmp_path / name).write_text(content, encoding="utf-8")
    code, out, err = translate("--corpus", *options, tmp_path / name)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and message in err, err
    assert {p.name for p in tmp_path.iterdir()} - {"home"} == {name}  # nothing written (home: the app's folders)


def test_parquet_without_the_column_is_named(translate, tmp_path):
    pq.write_table(pa.table({"body": ["a"]}), tmp_path / "t.parquet")
    code, _, err = translate("--corpus", tmp_path / "t.parquet")
    assert code == 1 and 't.parquet: no column "text" (body)' in err


def test_corpus_options_need_corpus(translate, tmp_path):
    code, _, err = translate("--shard-size", 2, tmp_path / "a.txt")
    assert code == 2 and "--shard-size: only with --corpus" in err
    code, _, err = translate(tmp_path / "a.txt", to="fra_Latn,deu_Latn")
    assert code == 2 and "several --to languages: only with --corpus" in err


def test_ray_flag_without_ray_says_how_to_get_it(translate, tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("Hello.\n", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails as where it is not installed
    code, _, err = translate("--ray", "--corpus", tmp_path / "a.txt")
    assert code == 2 and err == "dragoman: error: --ray needs Ray: pip install 'dragoman[ray]'\n"
