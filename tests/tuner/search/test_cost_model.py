"""The cost model: warm-up, retraining, ranking quality on a synthetic task, persistence, failures.

Labels here are a made-up formula of the sampled tile sizes, never timings: the model has to learn
it from the features of the lowered programs, which is what it must do with real timings too.
"""

import itertools
import json
import math

import numpy as np
import pytest

from compiler import Schedule
from compiler.workloads import workload_from_spec
from tests.machines import AVX512
from tuner.search.cost_model import CostModel, evaluate_ranking, normalized_throughput, random_ranking
from tuner.search.features import N_FEATURES, extract_features


def synthetic_seconds(ti: list[int], tj: list[int], tk: list[int]) -> float:
    """A made-up cost in the spirit of a roofline: vector lanes used, the register tile, whether the
    B panel fits in L1, and load balance of the parallel loop over 8 cores."""
    (i0, _, i2), (j0, j1, j2), (_, k1) = ti, tj, tk
    vector = min(j2, 16) / 16
    accumulators = i2 * math.ceil(j2 / 16)
    registers = min(accumulators, 8) / 8 if accumulators <= 24 else 0.3
    cache = 1.0 if k1 * j1 * j2 * 4 <= 32768 else 0.6
    parallel = i0 * j0 / (math.ceil(i0 * j0 / 8) * 8)
    return 1e-3 / (vector * registers * cache * parallel)


def random_matmuls(m: int, n: int, k: int, count: int, seed: int) -> tuple[list[np.ndarray], list[float]]:
    """Features and synthetic seconds of `count` random SSRSRS-like matmul schedules."""
    func = workload_from_spec({"op": "matmul", "params": {"M": m, "N": n, "K": k}}).func
    features, seconds = [], []
    for s in range(seed, seed + count):
        sch = Schedule(func, seed=s)
        block = sch.get_block("C")
        i, j, kk = sch.get_loops(block)
        ti = sch.sample_perfect_tile(i, n=3, max_innermost_factor=16)
        tj = sch.sample_perfect_tile(j, n=3, max_innermost_factor=64)
        tk = sch.sample_perfect_tile(kk, n=2, max_innermost_factor=64)
        i0, i1, i2 = sch.split(i, ti)
        j0, j1, j2 = sch.split(j, tj)
        k0, k1 = sch.split(kk, tk)
        sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
        sch.decompose_reduction(block, k0)
        sch.vectorize(j2)
        sch.parallel(sch.fuse(i0, j0))
        features.append(extract_features(sch.func, AVX512))
        seconds.append(synthetic_seconds(ti, tj, tk))
    return features, seconds


@pytest.fixture(scope="module")
def matmul_data() -> tuple[list[np.ndarray], list[float]]:
    return random_matmuls(128, 128, 128, 300, seed=0)


def random_topk(secs: list[float], k: int) -> float:
    """Expected top-k score of a random ranking: E[best label among k drawn without replacement]."""
    y = np.sort(normalized_throughput(secs))
    n = len(y)
    return sum(y[i] * math.comb(i, k - 1) / math.comb(n, k) for i in range(k - 1, n))


def chunks(features: list, secs: list, size: int, key: str) -> list[tuple[str, list, list]]:
    return [(key, features[s : s + size], secs[s : s + size]) for s in range(0, len(secs), size)]


def test_warm_up_scores_are_seeded_uniform_random(matmul_data):
    features, secs = matmul_data
    model = CostModel(seed=3)
    model.update([("mm", features[:63], secs[:63])])
    assert not model.is_trained and model.num_samples == 63
    first, second = model.predict(features[:50]), model.predict(features[:50])
    assert first.shape == (50,) and ((first >= 0) & (first < 1)).all()
    assert not np.array_equal(first, second)
    same_seed = CostModel(seed=3)
    assert np.array_equal(same_seed.predict(features[:50]), first)


def test_trains_at_min_samples_then_on_20_percent_growth(matmul_data):
    features, secs = matmul_data
    model = CostModel(seed=0)
    model.update([("mm", features[:63], secs[:63])])
    model.update([("mm", features[63:64], secs[63:64])])
    assert model.is_trained and model.num_samples == 64
    probe = features[200:240]
    trained = model.predict(probe)
    assert np.array_equal(model.predict(probe), trained)  # a trained model is deterministic
    model.update([("mm", features[64:76], secs[64:76])])  # 76 < 1.2 * 64: no retraining yet
    assert np.array_equal(model.predict(probe), trained)
    model.update([("mm", features[76:77], secs[76:77])])  # 77 >= 76.8: retrained on all 77
    assert not np.array_equal(model.predict(probe), trained)


def test_ranks_held_out_candidates_far_better_than_random(matmul_data):
    features, secs = matmul_data
    model = CostModel(seed=0)
    model.update([("mm", features[:200], secs[:200])])
    held_out = chunks(features[200:], secs[200:], 25, "mm")
    scores = evaluate_ranking(model, held_out)
    random1 = np.mean([random_topk(s, 1) for _, _, s in held_out])
    random5 = np.mean([random_topk(s, 5) for _, _, s in held_out])
    assert scores["top5"] >= 0.95 > random5 + 0.3, (scores, random5)
    assert scores["top1"] >= 0.8 > random1 + 0.4, (scores, random1)


def test_trees_are_at_most_four_deep(matmul_data):
    """Deeper trees (TVM uses 10) overfit the few hundred candidates of a tuning run: see the
    measurements in tuner/cost_model.py."""
    model = CostModel(seed=0)
    model.update([("mm", *matmul_data)])
    dumps = model._booster.get_dump(dump_format="json")  # type: ignore[union-attr]

    def depth(node: dict) -> int:
        return 1 + max((depth(c) for c in node.get("children", [])), default=-1)

    assert max(depth(json.loads(d)) for d in dumps) <= 4


def test_warm_start_from_another_workload(matmul_data):
    """Trained only on 128^3 records, the model already ranks a 64x256x96 matmul it never saw."""
    model = CostModel(seed=0)
    model.update([("mm128", *matmul_data)])
    features, secs = random_matmuls(64, 256, 96, 90, seed=1000)
    held_out = chunks(features, secs, 30, "mm64")
    scores = evaluate_ranking(model, held_out)
    random5 = np.mean([random_topk(s, 5) for _, _, s in held_out])
    assert scores["top5"] > random5 + 0.2, (scores, random5)


def test_save_load_round_trip(matmul_data, tmp_path):
    features, secs = matmul_data
    model = CostModel(seed=5, min_train_samples=40)
    model.update([("a", features[:30], secs[:30]), ("b", features[30:70], secs[30:70])])
    model.save(tmp_path / "model.npz")
    loaded = CostModel.load(tmp_path / "model.npz")
    assert loaded.is_trained and loaded.num_samples == model.num_samples == 70
    assert np.array_equal(loaded.predict(features[100:]), model.predict(features[100:]))
    # both go on identically: 14 more candidates make 84 >= 1.2 * 70, so both retrain
    for m in (model, loaded):
        m.update([("b", features[70:84], secs[70:84])])
    assert np.array_equal(loaded.predict(features[100:]), model.predict(features[100:]))


def test_save_load_keeps_the_warm_up_generator(matmul_data, tmp_path):
    features, _ = matmul_data
    model = CostModel(seed=9)
    model.predict(features[:7])
    model.save(tmp_path / "warm.npz")
    loaded = CostModel.load(tmp_path / "warm.npz")
    assert not loaded.is_trained and loaded.num_samples == 0
    assert np.array_equal(loaded.predict(features[:20]), model.predict(features[:20]))


def test_failures_train_fine_and_score_zero(matmul_data):
    features, secs = matmul_data
    failed: list[float | None] = list(secs[:100])
    for i in range(0, 100, 4):
        failed[i] = None
    failed[1], failed[2] = 0.0, float("inf")  # a zero or infinite time is a failure too
    model = CostModel(seed=0)
    model.update([("mm", features[:100], failed), ("all-failed", features[100:110], [None] * 10)])
    assert model.is_trained and model.num_samples == 110
    scores = model.predict(features[:100])
    assert np.isfinite(scores).all()
    broken = [i for i, s in enumerate(failed) if s is None or not 0 < s < float("inf")]
    working = [i for i in range(100) if i not in broken]
    assert scores[broken].mean() < scores[working].mean()


def test_labels_are_normalized_per_group():
    assert normalized_throughput([2.0, 4.0, None, 8.0]) == pytest.approx([1.0, 0.5, 0.0, 0.25])
    assert normalized_throughput([2000.0, 4000.0]) == pytest.approx([1.0, 0.5])
    assert normalized_throughput([None, 0.0]) == pytest.approx([0.0, 0.0])


class FixedScores:
    """A stand-in model whose ranking the test chooses."""

    def __init__(self, scores: list[float]) -> None:
        self.scores = np.array(scores)

    def predict(self, features: list[np.ndarray]) -> np.ndarray:
        return self.scores[: len(features)]


def test_evaluate_ranking_arithmetic():
    rows = [np.zeros((1, N_FEATURES), np.float32)] * 6
    secs = [1.0, 2.0, 4.0, 8.0, None, 16.0]  # throughputs 1, .5, .25, .125, 0, .0625
    model = FixedScores([0.0, 5.0, 1.0, 2.0, 9.0, 3.0])  # ranks 4, 1, 5, 3, 2, 0
    scores = evaluate_ranking(model, [("w", rows, secs), ("all failed", rows, [None] * 6)])  # type: ignore[arg-type]
    assert scores == {"top1": 0.0, "top5": 0.5}


def test_random_ranking_is_the_exact_expectation_over_every_subset():
    secs = [1.0, 2.0, None, 4.0, 3.0, 8.0, 5.0]
    labels = normalized_throughput(secs)
    rows = [np.zeros((1, N_FEATURES), np.float32)] * len(secs)
    exact = random_ranking([("w", rows, secs), ("all failed", rows, [None] * len(secs))])
    for k in (1, 5):
        every_subset = [max(c) for c in itertools.combinations(labels, k)]
        assert exact[f"top{k}"] == pytest.approx(np.mean(every_subset)) == pytest.approx(random_topk(secs, k))
    assert random_ranking([("three", rows[:3], [1.0, 2.0, 4.0])])["top5"] == 1.0  # all of them


def test_rejects_inconsistent_input():
    model = CostModel()
    model.update([("w", [np.ones((2, 10), np.float32)], [1.0])])
    with pytest.raises(ValueError, match="columns"):
        model.update([("w", [np.ones((2, 11), np.float32)], [1.0])])
    with pytest.raises(ValueError, match="timings"):
        model.update([("w", [np.ones((2, 10), np.float32)], [])])
    with pytest.raises(ValueError, match="non-empty"):
        model.predict([np.ones((0, 10), np.float32)])
