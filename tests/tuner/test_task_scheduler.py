"""The task scheduler shares one budget between tasks: it never overspends, round-robin is fair, the
gradient scheduler spends more on the layer that weighs most in the model's latency."""

import pytest

from runner import NullRunner
from tuner.task_scheduler import BatchHistory, WeightedWorkload, next_batches, tune_tasks

LAYERS = [
    WeightedWorkload(
        {"op": "dense_bias_relu", "params": {"batch": 4, "in_features": 64, "out_features": 32}}
    ),
    WeightedWorkload({"op": "dense_bias", "params": {"batch": 4, "in_features": 32, "out_features": 10}}),
]


@pytest.mark.parametrize("scheduler", ["round-robin", "gradient"])
def test_the_budget_is_shared_and_never_overspent(tuning_db, scheduler):
    result = tune_tasks(
        LAYERS, trials=20, database=tuning_db, runner=NullRunner(), scheduler=scheduler, batch_size=4
    )
    assert sum(r.trials for r in result.results) == 20
    assert set(result.order) == {0, 1}  # every task got at least one batch
    assert 0 < result.latency_secs < float("inf")


def test_round_robin_alternates(tuning_db):
    result = tune_tasks(
        LAYERS, trials=16, database=tuning_db, runner=NullRunner(), scheduler="round-robin", batch_size=4
    )
    assert result.order == [0, 1, 0, 1]


def test_gradient_favours_the_layer_that_runs_most_often(tuning_db):
    heavy = [WeightedWorkload(LAYERS[0].workload, weight=50), LAYERS[1]]
    result = tune_tasks(
        heavy, trials=40, database=tuning_db, runner=NullRunner(), scheduler="gradient", batch_size=4
    )
    assert result.order[:2] == [0, 1]  # one batch each first
    assert result.order.count(0) >= 3 * result.order.count(1)


@pytest.mark.parametrize("scheduler", ["round-robin", "gradient"])
def test_a_budget_too_small_for_a_batch_each_is_shared_over_every_task_first(tuning_db, scheduler):
    """Whole batches in turn left most of a model's layers unmeasured and its latency unknown."""
    three = [*LAYERS, WeightedWorkload({"op": "matmul", "params": {"M": 8, "N": 16, "K": 8}})]
    result = tune_tasks(
        three, trials=10, database=tuning_db, runner=NullRunner(), scheduler=scheduler, batch_size=8
    )
    assert [r.trials for r in result.results] == [3, 3, 4]
    assert result.order == [0, 1, 2]
    assert 0 < result.latency_secs < float("inf")


def test_an_unknown_scheduler_is_refused(tuning_db):
    with pytest.raises(ValueError, match="scheduler must be one of"):
        tune_tasks(LAYERS, trials=4, database=tuning_db, scheduler="fifo")


def test_the_first_round_gives_every_task_a_batch_sharing_a_small_budget():
    three = [BatchHistory(1), BatchHistory(1), BatchHistory(1, ended=True), BatchHistory(2)]
    assert next_batches("gradient", three, left=100, batch_trials=16, in_flight=2) == [
        (0, 16),
        (1, 16),
        (3, 16),
    ]
    assert next_batches("gradient", three, left=7, batch_trials=16, in_flight=2) == [(0, 2), (1, 2), (3, 3)]
    assert next_batches("gradient", three, left=2, batch_trials=16, in_flight=2) == [(0, 1), (1, 1)]


def test_after_the_first_round_the_scheduler_keeps_in_flight_batches_out():
    """The gradient scheduler picks the member whose next batch promises the most; a batch out counts
    as one that brought nothing, and a member with a batch out and none back gets no other."""
    slow, fast = BatchHistory(1, back=(1e-2,)), BatchHistory(1, back=(1e-3,))
    assert next_batches("gradient", [slow, fast], left=100, batch_trials=16, in_flight=1) == [(0, 16)]
    assert next_batches("gradient", [slow, fast], left=100, batch_trials=16, in_flight=2) == [
        (0, 16),
        (0, 16),
    ]
    waiting = BatchHistory(1, out=1)
    assert next_batches("gradient", [waiting, fast], left=100, batch_trials=16, in_flight=3) == [
        (1, 16),
        (1, 16),
    ]
    assert next_batches("round-robin", [slow, fast], left=20, batch_trials=16, in_flight=2) == [
        (0, 16),
        (1, 4),
    ]
    assert next_batches("gradient", [slow, fast], left=0, batch_trials=16, in_flight=2) == []
