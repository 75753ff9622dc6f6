"""tune_model: one budget over a model's tasks, progress after each batch, the model built from the
best records; a layer two models share is tuned once; the built model stays correct."""

from dataclasses import asdict

import numpy as np

from compiler import graph
from compiler.graph import GraphBuilder, Module
from compiler.target import host_hardware
from runner import MODEL_TIMING, NullRunner
from tuner import tune_model
from tuner.task_scheduler import BatchProgress

RNG = np.random.default_rng(3)


def weights(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.3).astype("float32")


def network(head: int) -> Module:
    """A conv layer both networks share (same shapes, other weights), then a head of `head` classes."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 6, 6), "float32")
    h = b.call(
        "conv2d",
        [x, b.constant("w", weights(8, 4, 3, 3))],
        strides=(1, 1),
        padding=(1, 1, 1, 1),
        dilation=(1, 1),
        groups=1,
    )
    h = b.call("relu", [h])
    flat = b.call("reshape", [b.call("mean", [h], axes=(2, 3), keepdims=True)], shape=(1, 8))
    return b.module([b.call("matmul", [flat, b.constant("fc", weights(8, head))])])


def test_the_budget_is_spent_over_the_tasks_and_the_model_is_built_from_it(tuning_db) -> None:
    module = network(head=5)
    seen: list[BatchProgress] = []
    result = tune_model(
        module, trials=24, database=tuning_db, runner=NullRunner(), batch_size=4, progress=seen.append
    )
    assert sum(t.trials for t in result.tasks) == 24 and len(seen) == 6
    assert [p.trials for p in seen] == [4, 8, 12, 16, 20, 24]
    assert {p.task for p in seen} == set(range(len(result.tasks)))
    finite = [secs for _, secs in result.curve if secs < float("inf")]
    assert finite and finite == sorted(finite, reverse=True)  # the estimate only improves
    assert result.estimated_secs == finite[-1]
    assert {s.origin for s in result.model.sources} == {"given"}
    x = RNG.standard_normal((1, 4, 6, 6)).astype("float32")
    np.testing.assert_allclose(result.model(x)[0], graph.run_reference(module, [x])[0], rtol=1e-4, atol=1e-4)


def test_a_layer_two_models_share_is_tuned_once(tuning_db) -> None:
    first = tune_model(network(head=5), trials=16, database=tuning_db, runner=NullRunner(), batch_size=4)
    conv = next(t for t in first.tasks if "conv2d" in t.task.ops)
    second = tune_model(network(head=3), trials=0, database=tuning_db, runner=NullRunner())
    shared = next(t for t in second.tasks if "conv2d" in t.task.ops)
    assert shared.task.workload_hash == conv.task.workload_hash
    assert shared.trials == 0 and shared.best_secs == conv.best_secs
    tuned_before = {t.task.workload_hash for t in first.tasks}
    origins = {s.func: s.origin for s in second.model.sources}
    assert {
        t.task.name: "given" if t.task.workload_hash in tuned_before else "default" for t in second.tasks
    } == origins
    assert "default" in origins.values()  # its head (3 classes, not 5) was never tuned


def test_a_models_kernels_are_timed_one_cold_call_at_a_time(tuning_db) -> None:
    """Without a runner of the caller's, each record holds MODEL_TIMING's repeats (twice for a
    would-be best, confirmed by a second measurement), each one call after the caches were evicted
    and the input read back: a forward pass finds each layer's weights in memory, its input in cache."""
    assert MODEL_TIMING.flush_cache and MODEL_TIMING.keep_first_warm
    assert MODEL_TIMING.number == 1 and MODEL_TIMING.min_repeat_ms == 0
    result = tune_model(network(head=5), trials=4, database=tuning_db, batch_size=4)
    records = [
        r
        for t in result.tasks
        for r in tuning_db.top_k(t.task.workload_hash, host_hardware().key, 10, timing_kind="layer")
    ]
    assert len(records) == 4
    assert {len(r.run_secs) for r in records} <= {MODEL_TIMING.repeat, 2 * MODEL_TIMING.repeat}
    assert all(r.timing == asdict(MODEL_TIMING) for r in records)


def test_a_model_with_an_extern_call_is_tuned_and_built_around_it(tuning_db) -> None:
    """An extern call is no task; the model built from the records calls it between its kernels."""

    def halve(a: np.ndarray, out: np.ndarray) -> None:
        np.multiply(a, 0.5, out=out)

    graph.register_func("test.halve", halve)
    try:
        b = GraphBuilder()
        x = b.input("x", (2, 8), "float32")
        h = b.call("relu", [b.call("matmul", [x, b.constant("w", weights(8, 8))])])
        h = b.call_dps_packed("test.halve", [h], ((2, 8), "float32"))
        module = b.module([b.call("matmul", [h, b.constant("fc", weights(8, 3))])])
        result = tune_model(module, trials=8, database=tuning_db, runner=NullRunner(), batch_size=4)
        assert len(result.tasks) == 2 and all(t.task.ops for t in result.tasks)
        assert {s.origin for s in result.model.sources} == {"given"}
        v = RNG.standard_normal((2, 8)).astype("float32")
        np.testing.assert_allclose(result.model(v)[0], graph.run_reference(module, [v])[0], rtol=1e-5)
    finally:
        graph.remove_func("test.halve")
