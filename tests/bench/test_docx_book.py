import json
import sys

from bench import docx_book


def test_the_book_is_timed_through_each_path_beside_the_engine(tiny_checkpoint, monkeypatch, capsys, tmp_path):
    """`python -m bench.docx_book` on the CPU with the tiny test model: the .docx (with and without
    protection), the .txt and the engine alone each give a rate and a share of the engine's, and
    (`--steps`) their steps: the engine alone has no constrained ones, the .docx some (its numbers
    kept: 12 tokens leave them room), each kind's time."""
    monkeypatch.setenv("DRAGOMAN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sys, "argv", ["docx_book", "--checkpoint", str(tiny_checkpoint), "--device", "cpu", "--pages", "1",
                                      "--beams", "1", "--new-tokens", "12", "--steps", "--out", str(tmp_path / "results")])
    docx_book.main()
    out = json.loads(capsys.readouterr().out)
    assert out["pages"] == 1 and out["sentences"] == len({s for p in docx_book.make_book(tmp_path / "one.docx", 1) for s in p})
    for path in ("docx", "docx_no_protect", "txt", "engine"):
        assert out[f"{path}_sent_per_s"] > 0 and out[f"{path}_share_of_engine"] > 0
    assert out["engine_share_of_engine"] == 1 and out["reading_and_writing_docx_s"] > 0
    steps = out["steps"]
    assert steps["engine"]["constrained_steps"] == 0 < steps["docx"]["constrained_steps"] <= steps["docx"]["steps"]
    assert all(0 < s["mean_rows"] and 0 <= s["before_first_step_s"] and 0 <= s["after_last_step_s"]
               and 0 < s["plain_step_ms_median"] and 0 < s["plain_launch_host_ms_mean"] for s in steps.values())
    assert "constrained_step_ms_median" not in steps["engine"]
    assert 0 < steps["docx"]["constrained_launch_host_ms_mean"] and 0 < steps["docx"]["constrained_step_ms_median"]
    assert json.loads((tmp_path / "results" / "docx_book_1.json").read_text()) == out


def test_each_document_run_opens_the_stores_of_a_new_data_folder_as_dragoman_translate_does(
        tiny_checkpoint, monkeypatch, capsys, tmp_path):
    """The document paths open the translation memory and cache (`TranslationSession.open`), each run
    in a data folder of its own, so a second run decodes again rather than reading the first's
    translations from the cache; `--paths` leaves out the paths not named (never the engine)."""
    from dragoman.app.session.session import TranslationSession

    opened = []
    open_session = TranslationSession.open.__func__

    def recording(cls, translator, paths=None, **kwargs):
        opened.append(paths.data_dir)
        return open_session(cls, translator, paths, **kwargs)

    monkeypatch.setattr(TranslationSession, "open", classmethod(recording))
    monkeypatch.setattr(sys, "argv", ["docx_book", "--checkpoint", str(tiny_checkpoint), "--device", "cpu", "--pages", "1",
                                      "--beams", "1", "--new-tokens", "4", "--steps", "--repeats", "2", "--paths", "docx"])
    docx_book.main()
    out = json.loads(capsys.readouterr().out)
    assert set(out["runs_s"]) == {"docx", "engine"} and len(out["runs_s"]["docx"]) == 2
    assert len(opened) == 3 and len(set(opened)) == 3  # the warm-up and two runs
    assert out["steps"]["docx"]["steps"] > 0  # the last run decoded: nothing came from the cache


class Moment:
    """A stand-in for a CUDA event recorded at `seconds` on the device's clock."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def elapsed_time(self, later: "Moment") -> float:
        return (later.seconds - self.seconds) * 1000  # milliseconds, as torch.cuda.Event's


def test_the_devices_idle_time_is_put_down_to_what_the_host_was_doing_meanwhile():
    """Each gap between the device's steps ends when the host queued the next one: the host's
    work that overlaps the gap's length before that moment is what the device waited for."""
    log = docx_book.StepLog.__new__(docx_book.StepLog)
    log.entries, log.admissions, log.admission_starts = [], [], []
    log.busy = {"submit": [(10.0105, 10.030)], "report": [(10.0021, 10.0022)], "feed": [], "admit": []}
    # On the device: steps at 0-1 ms, 3-4 ms (a 2 ms gap; queued at 10.003 on the host), 4-5 ms (none)
    # and 20-21 ms (a 15 ms gap, queued at 10.025), an admission at 21-22 ms and one at 24-25 ms
    # (a 2 ms gap, queued at 10.029).
    for start, end, host in ((0, 1e-3, 10.0), (3e-3, 4e-3, 10.003), (4e-3, 5e-3, 10.0035), (20e-3, 21e-3, 10.025)):
        log.entries.append(docx_book.LoggedStep(host, 4, False, 0.0, 0, 0, 1, True, (Moment(start), Moment(end))))
    log.admissions += [(Moment(21e-3), Moment(22e-3)), (Moment(24e-3), Moment(25e-3))]
    log.admission_starts += [10.026, 10.029]
    found = log._idle_while(Moment(0))
    assert found == {"submit": 0.017, "report": 0.002, "feed": 0.0, "admit": 0.0, "nothing recorded": 0.0,
                     "gaps_over_1ms": 3}
    log.busy["submit"].clear()
    assert log._idle_while(Moment(0))["nothing recorded"] == 0.017
