"""The new-best rule the embedded tuner and the service share: a result beating the best is measured
again; its record keeps both runs' repeats and ranks by the slower median, or, measured side by side
with the best, by their ratio; a failed second run is the record's failure."""

import pytest

from runner import NullRunner
from runner.confirm import Incumbent, Versus, confirm, measure_confirming, would_be_best
from runner.results import Candidate, RunResult, Status

FAST, SLOW = RunResult(Status.OK, [1e-4] * 3, "", 0.5), RunResult(Status.OK, [5e-3] * 5, "", 0.7)


def test_a_would_be_best_beats_the_best_and_is_ok():
    assert would_be_best(FAST, None) and would_be_best(FAST, 2e-4)
    assert not would_be_best(FAST, 1e-4)  # a tie is no new best
    assert not would_be_best(RunResult(Status.WRONG_RESULT), None)


def test_a_confirmed_best_keeps_both_runs_and_ranks_by_the_slower_median():
    confirmed = confirm(FAST, SLOW, by="w2#7")
    assert confirmed.result.run_secs == [1e-4] * 3 + [5e-3] * 5
    assert confirmed.ranked_secs == 5e-3  # not the merged median: a run of many fast repeats cannot carry it
    assert (confirmed.result.message, confirmed.result.build_secs) == ("re-measured by w2#7", 0.5)
    assert confirm(SLOW, FAST).ranked_secs == 5e-3


def test_a_failed_remeasurement_is_the_records_failure():
    confirmed = confirm(FAST, RunResult(Status.WRONG_RESULT, message="Y: 3 elements differ"))
    assert confirmed.ranked_secs is None
    assert (confirmed.result.status, confirmed.result.run_secs) == (Status.WRONG_RESULT, [])
    assert confirmed.result.message == "its re-measurement failed: Y: 3 elements differ"


@pytest.mark.parametrize(("second", "best_after"), [(2e-4, 2e-4), (5e-3, 1e-3)])
def test_the_embedded_tuner_lowers_its_best_to_the_rank_only(second: float, best_after: float):
    """A lucky first run (1e-4) whose second run is slower than the best known (1e-3) does not become
    the best: the record ranks by the slower run."""
    runs = iter([1e-4, second])
    runner = NullRunner(lambda c: next(runs), repeat=3)
    candidate = Candidate({}, {})
    best = {"task": Incumbent(1e-3)}  # its program unknown: measured again alone
    (measured,) = measure_confirming(runner, [candidate], ["task"], best)
    assert measured.remeasured and measured.ranked_secs == second
    assert best["task"].secs == best_after
    assert best["task"].candidate == (candidate if best_after == second else None)


def _ok(secs: float) -> RunResult:
    return RunResult(Status.OK, [secs] * 3)


def test_side_by_side_a_would_be_best_no_faster_than_the_best_ranks_above_it():
    """The best was recorded in a slow phase (3e-4); the would-be best measured quick alone, but side
    by side it takes twice the best's time: it ranks at twice the best's rank, not at its own runs."""
    confirmed = confirm(_ok(1e-4), _ok(2e-4), versus=Versus(_ok(1e-4), best_secs=3e-4))
    assert confirmed.ranked_secs == pytest.approx(6e-4)
    assert confirmed.result.run_secs == [1e-4] * 3 + [2e-4] * 3  # the best's times are not its own
    assert "side by side with the best: 2.000x its time" in confirmed.result.message


def test_side_by_side_a_faster_would_be_best_ranks_below_the_best_whatever_its_runs_read():
    """Its second run fell in a slow phase (5e-4 alone would not beat 3e-4), but the best, timed in
    the same rounds, took twice as long: it ranks at half the best's rank."""
    confirmed = confirm(_ok(1e-4), _ok(5e-4), versus=Versus(_ok(1e-3), best_secs=3e-4))
    assert confirmed.ranked_secs == pytest.approx(1.5e-4)
    quick = confirm(_ok(2e-4), _ok(2.2e-4), versus=Versus(_ok(1e-3), best_secs=3e-4))
    assert quick.ranked_secs == pytest.approx(2.2e-4)  # its slower run beats the best: ranked by it
    first = RunResult(Status.OK, [6e-4, 4e-4, 6e-4])
    floored = confirm(first, _ok(5e-4), versus=Versus(_ok(5e-3), best_secs=3e-4))
    assert floored.ranked_secs == 4e-4  # 3e-5 by the ratio, but never below a repeat it ran


def test_a_best_that_fails_side_by_side_leaves_the_plain_rule():
    failed = RunResult(Status.BUILD_ERROR, message="an old trace")
    confirmed = confirm(_ok(1e-4), _ok(2e-4), versus=Versus(failed, best_secs=3e-4))
    assert confirmed.ranked_secs == 2e-4 and "side by side" not in confirmed.result.message


def test_the_embedded_tuner_times_a_would_be_best_beside_the_best_it_would_replace():
    seconds = {"best": 1e-3, "new": 5e-4}
    calls = []

    class Recording(NullRunner):
        def run_side_by_side(self, candidates):
            calls.append([c.trace["name"] for c in candidates])
            return super().run_side_by_side(candidates)

    runner = Recording(lambda c: seconds[c.trace["name"]])
    old, new = Candidate({}, {"name": "best"}), Candidate({}, {"name": "new"})
    best = {"task": Incumbent(2e-3, old)}
    (measured,) = measure_confirming(runner, [new], ["task"], best)
    assert calls == [["new", "best"]]
    assert measured.ranked_secs == 5e-4 and "0.500x its time" in measured.result.message
    assert best["task"] == Incumbent(5e-4, new)  # the next would-be best is timed beside this one
