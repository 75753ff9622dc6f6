"""The task scheduler shares one budget between tasks: it never overspends, round-robin is fair, the
gradient scheduler spends more on the layer that weighs most in the model's latency."""

import pytest

from runner import NullRunner
from tuner.task_scheduler import Task, tune_tasks

LAYERS = [
    Task({"op": "dense_bias_relu", "params": {"batch": 4, "in_features": 64, "out_features": 32}}),
    Task({"op": "dense_bias", "params": {"batch": 4, "in_features": 32, "out_features": 10}}),
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
    heavy = [Task(LAYERS[0].workload, weight=50), LAYERS[1]]
    result = tune_tasks(
        heavy, trials=40, database=tuning_db, runner=NullRunner(), scheduler="gradient", batch_size=4
    )
    assert result.order[:2] == [0, 1]  # one batch each first
    assert result.order.count(0) >= 3 * result.order.count(1)


@pytest.mark.parametrize("scheduler", ["round-robin", "gradient"])
def test_a_budget_too_small_for_a_batch_each_is_shared_over_every_task_first(tuning_db, scheduler):
    """Whole batches in turn left most of a model's layers unmeasured and its latency unknown."""
    three = [*LAYERS, Task({"op": "matmul", "params": {"M": 8, "N": 16, "K": 8}})]
    result = tune_tasks(
        three, trials=10, database=tuning_db, runner=NullRunner(), scheduler=scheduler, batch_size=8
    )
    assert [r.trials for r in result.results] == [3, 3, 4]
    assert result.order == [0, 1, 2]
    assert 0 < result.latency_secs < float("inf")


def test_an_unknown_scheduler_is_refused(tuning_db):
    with pytest.raises(ValueError, match="scheduler must be one of"):
        tune_tasks(LAYERS, trials=4, database=tuning_db, scheduler="fifo")
