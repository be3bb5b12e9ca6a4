import pytest

from bench.host import timed_calls


def test_timed_calls_time_each_call_and_pass_results_and_errors_through():
    class Box:
        def double(self, x):
            return 2 * x

        def fail(self):
            raise ValueError("no")

    box, spent = Box(), {}
    timed_calls(box, "double", "double", spent)
    timed_calls(box, "fail", "fail", spent)
    assert box.double(3) == 6 and box.double(x=4) == 8
    with pytest.raises(ValueError, match="no"):
        box.fail()
    assert len(spent["double"]) == 2 and len(spent["fail"]) == 1
    assert all(seconds >= 0 for seconds in spent["double"] + spent["fail"])
