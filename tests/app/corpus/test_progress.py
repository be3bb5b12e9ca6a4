"""RunProgress: a line kept up to date on a terminal, one summary line otherwise."""

import io

from dragoman.app.corpus.progress import RunProgress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def run(stream):
    progress = RunProgress(stream)
    progress.start([2, 1], 30)
    progress.done(0, "w0", 10, 12)
    progress.kept(1, 5)
    progress.worker_replaced()
    progress.done(0, "w1", 15, 7)
    progress.end()
    return stream.getvalue()


def test_a_terminal_sees_each_step_and_the_summary():
    shown = run(Terminal())
    steps = shown.split("\r\033[K")
    assert "files 0/2  shards 1/3" in steps[1] and "files 1/2  shards 2/3 (1 done before)" in steps[2]
    assert shown.endswith("\n") and shown.count("\n") == 1
    summary = steps[-1]
    assert summary.startswith("dragoman: files 2/2  shards 3/3 (1 done before)  19 sentences")
    assert "workers w0 12, w1 7  1 worker replaced in " in summary


def test_elsewhere_only_the_summary():
    shown = run(io.StringIO())
    assert shown.count("\n") == 1 and "\r" not in shown and shown.startswith("dragoman: files 2/2  shards 3/3")
