"""The all-core FMA peak is re-measured while a busy core holds it down."""

from __future__ import annotations

import pytest

from bench import peak


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peak, "PAUSE_SECS", 0.0)


def readings(*values: float):
    """A stand-in for the timed run: the given all-core figures, one per call."""
    it = iter(values)
    calls = []

    def run(threads: int) -> float:
        calls.append(threads)
        return next(it)

    return run, calls


def test_a_settled_figure_is_taken_at_once() -> None:
    run, calls = readings(240.0)
    assert peak.all_cores_peak(run, cores=2, one=125.0) == 240.0
    assert calls == [2]


def test_a_busy_core_is_measured_again_until_it_settles() -> None:
    run, calls = readings(126.0, 130.0, 249.0, 999.0)
    assert peak.all_cores_peak(run, cores=2, one=125.0) == 249.0
    assert len(calls) == 3


def test_a_figure_that_never_settles_is_the_best_seen_with_a_warning() -> None:
    run, calls = readings(*[126.0 + i for i in range(peak.ATTEMPTS)])
    with pytest.warns(UserWarning, match="a core is busy"):
        best = peak.all_cores_peak(run, cores=2, one=125.0)
    assert best == 126.0 + peak.ATTEMPTS - 1
    assert len(calls) == peak.ATTEMPTS
