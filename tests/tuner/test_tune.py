"""tune() end to end on SQLite and PostgreSQL: records kept, resumed runs never re-measure, failures
recorded but never best, compile_best builds the winner; with the null runner (exact, fast)."""

from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np
import pytest

from compiler import Schedule, ScheduleError, Trace
from compiler.ir import IRModule
from compiler.schedule import loop_transform
from compiler.workloads import workload_from_spec
from compiler.workloads.primfunc_spec import primfunc_spec
from runner import MODEL_TIMING, Candidate, NullRunner, RunResult, Status, TimingKind
from runner.null import hashed_seconds
from runner.results import MIN_CUTOFF_SECS
from tests.compiler.workloads.test_primfunc_spec import fused_conv2d_add_relu
from tuner.best import best_record, compile_best
from tuner.database import Database
from tuner.search.training_data import evaluate_model, groups_from_records, hardware_records, split_group_key
from tuner.tune import tune, tune_tir

SPEC = {"op": "matmul", "params": {"M": 48, "N": 64, "K": 32}}


@pytest.fixture
def db(tuning_db):
    """Every test here runs on SQLite and on PostgreSQL (see conftest.py)."""
    return tuning_db


def records_of(db: Database) -> list:
    (workload,) = db.workloads()
    return [r for hw in db.hardware_list() for r in db.records(workload_id=workload.id, hardware_id=hw.id)]


@pytest.mark.parametrize("strategy", ["random", "evolutionary"])
def test_tune_keeps_every_record_and_reports_the_best(db, strategy):
    result = tune(SPEC, trials=12, database=db, runner=NullRunner(), strategy=strategy, batch_size=4)
    assert result.trials == 12 and len(result.curve) == 12
    assert result.curve == sorted(result.curve)  # best so far never gets worse
    records = records_of(db)
    assert len(records) == 12 and len({r.program_hash for r in records}) == 12
    assert result.best.median_secs == min(r.median_secs for r in records)
    assert result.best_gflops == pytest.approx(workload_from_spec(SPEC).flops / result.best.median_secs / 1e9)


def test_running_again_continues_without_measuring_a_program_twice(db):
    tune(SPEC, trials=8, database=db, runner=NullRunner(), strategy="random", batch_size=4)
    tune(SPEC, trials=8, database=db, runner=NullRunner(), strategy="random", batch_size=4)
    records = records_of(db)
    assert len(records) == 16 and len({r.program_hash for r in records}) == 16
    func = workload_from_spec(SPEC).func
    for r in records:  # the identity is the program's, and the stored trace makes that program
        assert Trace.from_json(r.trace).apply(func).func.structural_hash() == r.program_hash


class FlakyRunner(NullRunner):
    """Every third candidate computes wrong numbers, and it would have been the fastest."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def iter_run(self, candidates: Sequence[Candidate]) -> Iterator[RunResult]:
        for c in candidates:
            self.count += 1
            if self.count % 3 == 0:
                yield RunResult(Status.WRONG_RESULT, [1e-9], "C mismatched at (0, 0)")
            else:
                yield from super().iter_run([c])


def test_wrong_results_are_recorded_but_never_best(db):
    result = tune(SPEC, trials=9, database=db, runner=FlakyRunner(), strategy="random", batch_size=3)
    statuses = [r.status for r in records_of(db)]
    assert statuses.count("wrong_result") >= 2
    assert result.best.status == "ok"


def test_compile_best_builds_the_fastest_known_schedule(db):
    tune(SPEC, trials=4, database=db, runner=NullRunner(), strategy="random")
    kernel = compile_best(SPEC, database=db)
    workload = workload_from_spec(SPEC)
    a, b = workload.random_inputs(np.random.default_rng(0))
    (c,) = workload.empty_outputs()
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_tune_tir_takes_a_primfunc_or_its_module_as_written(db):
    """TVM's tune_tir: no spec to write; the same workload (and records) as the registry's op."""
    func = workload_from_spec(SPEC).func
    result = tune_tir(IRModule((func,)), trials=3, database=db, runner=NullRunner(), strategy="random")
    assert result.trials == 3 and result.workload.num_inputs == 2
    assert result.workload.func.structural_hash() == func.structural_hash()
    assert tune(func, trials=2, database=db, runner=NullRunner(), strategy="random").trials == 2
    assert len(db.workloads()) == 1 and len(records_of(db)) == 5
    kernel = compile_best(func, database=db)
    a, b = workload_from_spec(SPEC).random_inputs(np.random.default_rng(0))
    c = np.empty((48, 64), np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="one function at a time"):
        tune_tir(IRModule((func, replace(func, name="other"))), database=db, runner=NullRunner())


class LayerRunner(NullRunner):
    """Times as a model's layer is timed (cold), ten times slower than a kernel timed warm."""

    timing = MODEL_TIMING

    def __init__(self) -> None:
        super().__init__(lambda c: 10 * hashed_seconds(c))


def test_a_layer_tuned_after_its_kernel_is_measured_and_ranked_as_a_layer(db):
    """The same workload tuned warm, then cold as a model's layer: the layer's search measures the
    programs the kernel's measured (a warm time is not a layer's), ranks only layer records, and a
    model is built from those while a kernel is compiled from the warm ones."""
    kernel = tune(SPEC, trials=6, database=db, runner=NullRunner(), strategy="random")
    layer = tune(SPEC, trials=6, database=db, runner=LayerRunner(), strategy="random")
    assert (kernel.best.timing_kind, layer.best.timing_kind) == ("warm", "layer")
    records = records_of(db)
    warm = {r.program_hash for r in records if r.timing_kind == "warm"}
    cold = {r.program_hash for r in records if r.timing_kind == "layer"}
    assert len(warm) == len(cold) == 6 and warm & cold  # the same seed draws the same programs first
    assert layer.best.median_secs == min(r.median_secs for r in records if r.timing_kind == "layer")
    key, hardware = kernel.workload.func.structural_hash(), kernel.hardware.key
    assert best_record(db, key, hardware, TimingKind.LAYER).id == layer.best.id
    assert best_record(db, key, hardware, TimingKind.WARM).id == kernel.best.id
    # The cost model ranks each kind within its own group: a layer's time is not a kernel's.
    groups = groups_from_records(records, kernel.hardware.target)
    assert sorted((g[0], len(g[2])) for g in groups) == [(key, 6), (f"{key}/layer", 6)]
    assert sorted(split_group_key(g[0]) for g in groups) == [(key, "layer"), (key, "warm")]


def test_a_layer_without_layer_records_takes_the_kernels_best(db):
    kernel = tune(SPEC, trials=4, database=db, runner=NullRunner(), strategy="random")
    key, hardware = kernel.workload.func.structural_hash(), kernel.hardware.key
    assert best_record(db, key, hardware, TimingKind.LAYER).id == kernel.best.id
    assert best_record(db, "unknown", hardware, TimingKind.LAYER) is None


def test_compile_best_of_an_untuned_workload_says_so(db):
    with pytest.raises(LookupError, match="tune it first"):
        compile_best({"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}, database=db)


def innermost_tile_seconds(candidate: Candidate) -> float:
    """A learnable fake timing: wider innermost j tiles (vectors) are faster."""
    tiles = [i["decision"] for i in candidate.trace["instructions"] if i["kind"] == "sample_perfect_tile"]
    return 1e-3 / tiles[1][-1]


def test_records_train_a_model_that_ranks_held_out_candidates(db):
    result = tune(SPEC, trials=40, database=db, runner=NullRunner(innermost_tile_seconds), strategy="random")
    groups = groups_from_records(hardware_records(db, result.hardware.key), result.hardware.target)
    assert [len(f) for _, f, _ in groups] == [40]
    scores = evaluate_model(groups, holdout=0.25, splits=4)
    assert scores["candidates"] == 10 and scores["splits"] == 4
    assert scores["top1"] > scores["random_top1"]
    (key, _, _) = groups[0]
    per_workload = scores["per_workload"][key]
    assert per_workload["candidates"] == 40
    assert per_workload["top1"] == scores["top1"] and per_workload["top5_std"] == scores["top5_std"]
    assert evaluate_model(groups, holdout=0.25, splits=4) == scores  # seeded: the same splits again
    one_split = [evaluate_model(groups, holdout=0.25, seed=s)["random_top5"] for s in range(4)]
    assert scores["random_top5"] == pytest.approx(np.mean(one_split))  # splits are seed, seed + 1, ...


class LuckyOnceRunner(NullRunner):
    """The first candidate it sees measures 10x faster than anything, once; never again."""

    def __init__(self):
        super().__init__()
        self.lucky: str | None = None
        self.lucky_runs = 0

    def iter_run(self, candidates: Sequence[Candidate]) -> Iterator[RunResult]:
        for c in candidates:
            self.lucky = self.lucky or c.key
            if c.key == self.lucky:
                self.lucky_runs += 1
                yield RunResult(Status.OK, [1e-4 if self.lucky_runs == 1 else 5e-3] * 3)
            else:
                yield from super().iter_run([c])


def test_a_winner_that_does_not_hold_on_remeasurement_is_not_the_best(db):
    runner = LuckyOnceRunner()
    result = tune(SPEC, trials=8, database=db, runner=runner, strategy="random", batch_size=4)
    # measured again before being believed, then once more beside the would-be best that replaced it
    assert runner.lucky_runs == 3
    lucky = next(r for r in records_of(db) if r.remeasured and len(r.run_secs) == 6)
    assert lucky.median_secs == 5e-3  # every repeat is kept; the slow ones decide
    assert result.best.median_secs < 2e-3 and result.best.id != lucky.id


def test_candidates_after_the_first_batch_are_cut_off_by_the_best(db):
    """Once a best is known, each batch's candidates carry the cutoff beyond which a first call gets
    one repeat: 10x the best's time, at least MIN_CUTOFF_SECS (these run 1-2 ms)."""
    seen: list[float | None] = []
    runner = NullRunner(lambda c: seen.append(c.cutoff_secs) or hashed_seconds(c))
    tune(SPEC, trials=8, database=db, runner=runner, strategy="random", batch_size=4)
    first = seen.index(MIN_CUTOFF_SECS)
    assert first >= 4 and set(seen[:first]) == {None} and set(seen[first:]) == {MIN_CUTOFF_SECS}


def stochastic_schedule_mm(sch: Schedule) -> None:
    """The MLC course's user-defined space: one sampled split of j, k moved between its parts."""
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
    sch.reorder(i, j0, k, j1)
    sch.decompose_reduction(block, k)


def test_a_user_defined_space_is_searched_until_exhausted(db):
    result = tune(SPEC, trials=50, database=db, runner=NullRunner(), space=stochastic_schedule_mm)
    # j = 64 splits five ways with the inner factor <= 16 (1, 2, 4, 8, 16): each measured once, then done
    assert result.trials == 5
    traces = [r.trace for r in records_of(db)]
    assert all(any(i["kind"] == "decompose_reduction" for i in t["instructions"]) for t in traces)


def test_a_bug_in_a_primitive_raises_out_of_tune(db, monkeypatch):
    """A bug is not a refused draw: swallowed, it would look like an exhausted space."""

    def broken_split(*args, **kwargs):
        raise RuntimeError("a bug in split")

    monkeypatch.setattr(loop_transform, "split", broken_split)
    with pytest.raises(RuntimeError, match="a bug in split"):
        tune(SPEC, trials=4, database=db, runner=NullRunner(), strategy="random")


def test_draws_a_space_refuses_are_skipped(db):
    """A user space may refuse some draws (ScheduleError): those are no candidates, the rest are."""

    def picky(sch: Schedule) -> None:
        stochastic_schedule_mm(sch)
        if sch.rng.random() < 0.5:
            raise ScheduleError("not this one")

    result = tune(SPEC, trials=50, database=db, runner=NullRunner(), space=picky, strategy="random")
    assert result.trials == 5  # every program of the space (5 tiles of j), refusals or not


def test_a_fused_primfunc_is_tuned_and_recorded_under_its_structural_hash(db):
    """The same layer from another model (another function name) is the same workload: its tuning
    continues the first one's, and the best schedule builds a kernel that computes the layer."""
    spec = primfunc_spec(fused_conv2d_add_relu(name="model_a_block1"), 3)
    result = tune(spec, trials=8, database=db, runner=NullRunner(), strategy="evolutionary", batch_size=4)
    assert result.trials == 8 and result.best is not None
    other = primfunc_spec(fused_conv2d_add_relu(name="model_b_layer4"), 3)
    tune(other, trials=4, database=db, runner=NullRunner(), strategy="random", batch_size=4)
    (workload,) = db.workloads()
    assert workload.hash == fused_conv2d_add_relu().structural_hash() and workload.name == "model_a_block1"
    assert workload.flops == workload_from_spec(spec).flops
    records = records_of(db)
    assert len(records) == 12 and len({r.program_hash for r in records}) == 12
    wl = workload_from_spec(other)
    inputs = wl.random_inputs(np.random.default_rng(0))
    outputs = wl.empty_outputs()
    compile_best(other, database=db)(*inputs, *outputs)
    np.testing.assert_allclose(outputs[0], wl.reference(*inputs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("strategy", ["random", "evolutionary"])
def test_the_search_starts_from_the_default_schedule_once(db, strategy):
    """The first program measured is the untuned default's; a second run does not measure it again."""
    from compiler.schedule_rules import default_schedule
    from compiler.target import host_hardware

    default = default_schedule(workload_from_spec(SPEC).func, host_hardware().target).func.structural_hash()
    tune(SPEC, trials=4, database=db, runner=NullRunner(), strategy=strategy, batch_size=4)
    first, *rest = records_of(db)
    assert first.program_hash == default and default not in {r.program_hash for r in rest}
    tune(SPEC, trials=4, database=db, runner=NullRunner(), strategy=strategy, batch_size=4)
    assert [r.program_hash for r in records_of(db)].count(default) == 1


def test_a_user_space_does_not_start_from_the_default_schedule(db):
    from compiler.schedule_rules import default_schedule
    from compiler.target import host_hardware

    default = default_schedule(workload_from_spec(SPEC).func, host_hardware().target).func.structural_hash()
    result = tune(SPEC, trials=50, database=db, runner=NullRunner(), space=stochastic_schedule_mm)
    assert result.trials == 5  # every program of that space, and nothing else
    assert default not in {r.program_hash for r in records_of(db)}
