"""The new-best rule the embedded tuner and the service share: a result beating the best is measured
again; its record keeps both runs' repeats and ranks by the slower median; a failed second run is the
record's failure."""

import pytest

from runner import NullRunner
from runner.confirm import confirm, measure_confirming, would_be_best
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
    best = {"task": 1e-3}
    (measured,) = measure_confirming(runner, [Candidate({}, {})], ["task"], best)
    assert measured.remeasured and measured.ranked_secs == second
    assert best == {"task": best_after}
