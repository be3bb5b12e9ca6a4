import pytest

from bench.profile import incremental_costs


def test_chained_kernels_are_charged_what_they_add_to_the_time_line():
    kernels = [
        ("a", 0.0, 4.0),
        ("b", 1.0, 6.0),  # chained: started under a, waited; adds 2
        ("a", 8.0, 9.0),  # after 2 idle: its own 1
        ("c", 8.5, 9.5),  # adds 0.5
    ]
    costs, idle = incremental_costs(list(reversed(kernels)))  # any order in, ordered by their ends
    assert costs == {"a": (5.0, 2), "b": (2.0, 1), "c": (0.5, 1)}
    assert idle == 2.0
    span = 9.5 - 0.0
    assert sum(total for total, _ in costs.values()) + idle == pytest.approx(span)


def test_no_kernels():
    assert incremental_costs([]) == ({}, 0.0)
