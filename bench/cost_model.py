"""How well the cost model ranks, on random candidates measured on this machine: 320 each of matmul
512^3 and conv2d 1x64x56x56 k64, 240 each of matmul 384^3 and conv2d 1x32x28x28 k64, measured once
into a database that later runs reuse (a fresh database takes ~15 minutes to fill).

Within a workload: `evaluate_model` over `splits` random splits with 25% of each workload held out.
Across workloads (a warm start): trained on the first two workloads, ranking random 60-candidate
sets of the other two. Both next to the exact score of a random ranking, and next to the same model
with TVM's tree depth (10), as paired differences over the same splits (mean +- standard error)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from compiler.target import host_hardware
from compiler.workloads import workload_from_spec
from tuner.database import Database
from tuner.search import cost_model
from tuner.search.cost_model import CostModel, Group, evaluate_ranking, random_ranking
from tuner.search.training_data import evaluate_model, groups_from_records, hardware_records
from tuner.tune import tune

CONV = {"N": 1, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "padding": 1}
TRAIN = {  # name: (spec, candidates)
    "matmul 512^3": ({"op": "matmul", "params": {"M": 512, "N": 512, "K": 512}}, 320),
    "conv2d 64ch 56x56": ({"op": "conv2d_nchw", "params": {**CONV, "C": 64}}, 320),
}
OTHER = {
    "matmul 384^3": ({"op": "matmul", "params": {"M": 384, "N": 384, "K": 384}}, 240),
    "conv2d 32ch 28x28": ({"op": "conv2d_nchw", "params": {**CONV, "C": 32, "H": 28, "W": 28}}, 240),
}
DEFAULT_DATABASE = f"sqlite:///{os.path.join(tempfile.gettempdir(), 'tensor-tuner-bench-cost-model.db')}"
CROSS_SET, CROSS_SEEDS = 60, 5


def collect(database: str) -> dict[str, Group]:
    """Measure random candidates of each workload until it has its count, then load them all."""
    host = host_hardware()
    hardware = host.key
    keys = {
        name: workload_from_spec(spec).func.structural_hash()
        for name, (spec, _) in {**TRAIN, **OTHER}.items()
    }
    for name, (spec, count) in {**TRAIN, **OTHER}.items():
        with Database.open(database) as db:
            have = sum(r.workload_hash == keys[name] for r in hardware_records(db, hardware))
        if have < count:
            tune(spec, trials=count - have, database=database, strategy="random", seed=have)
    with Database.open(database) as db:
        records = hardware_records(db, hardware)
    groups = {g[0]: g for g in groups_from_records(records, host.target)}
    spread = {
        name: np.median(
            [
                (max(r.run_secs) - min(r.run_secs)) / r.median_secs
                for r in records
                if r.run_secs and r.workload_hash == key
            ]
        )
        for name, key in keys.items()
    }
    print(
        "measurement noise, median over candidates of (max - min) / median of their repeats: "
        + ", ".join(f"{name} {v:.2f}" for name, v in spread.items())
    )
    return {name: groups[key] for name, key in keys.items()}


@contextmanager
def tree_depth(depth: int) -> Iterator[None]:
    saved = cost_model.XGB_PARAMS["max_depth"]
    cost_model.XGB_PARAMS["max_depth"] = depth
    try:
        yield
    finally:
        cost_model.XGB_PARAMS["max_depth"] = saved


def within(groups: list[Group], splits: int) -> dict[str, dict[str, np.ndarray]]:
    """Per workload and metric, the score of each split (one split per seed, so runs pair up)."""
    out: dict[str, dict[str, list[float]]] = {}
    for seed in range(splits):
        for key, s in evaluate_model(groups, holdout=0.25, seed=seed)["per_workload"].items():
            for metric, value in s.items():
                out.setdefault(key, {}).setdefault(metric, []).append(value)
    return {k: {m: np.array(v) for m, v in d.items()} for k, d in out.items()}


def across(train: list[Group], test: list[Group]) -> dict[str, dict[str, np.ndarray]]:
    """Trained on `train` (CROSS_SEEDS seeds), the mean score over random sets of each test workload."""
    rng = np.random.default_rng(0)
    out: dict[str, dict[str, list[float]]] = {}
    sets = {}
    for key, feats, secs in test:
        picks = [rng.choice(len(feats), CROSS_SET, replace=False) for _ in range(40)]
        sets[key] = [(key, [feats[i] for i in p], [secs[i] for i in p]) for p in picks]
        chance = random_ranking(sets[key])
        out[key] = {f"random_{m}": [v] * CROSS_SEEDS for m, v in chance.items()}
    for seed in range(CROSS_SEEDS):
        model = CostModel(seed=seed, min_train_samples=2)
        model.update(train)
        for key in sets:
            for metric, value in evaluate_ranking(model, sets[key]).items():
                out[key].setdefault(metric, []).append(value)
    return {k: {m: np.array(v) for m, v in d.items()} for k, d in out.items()}


def report(title: str, names: dict[str, str], new: dict, old: dict) -> None:
    print(title)
    for key, scores in new.items():
        cells = []
        for m in ("top1", "top5"):
            diff = scores[m] - old[key][m]
            cells.append(
                f"{m} {scores[m].mean():.2f} (depth 10: {old[key][m].mean():.2f}, difference "
                f"{diff.mean():+.2f} +- {diff.std(ddof=1) / np.sqrt(len(diff)):.2f}; random "
                f"{scores[f'random_{m}'].mean():.2f})"
            )
        print(f"  {names[key]}: " + ", ".join(cells))


def main(database: str = DEFAULT_DATABASE, splits: int = 30) -> None:
    groups = collect(database)
    names = {g[0]: name for name, g in groups.items()}
    depth = cost_model.XGB_PARAMS["max_depth"]
    inside = within(list(groups.values()), splits)
    cross = across([groups[n] for n in TRAIN], [groups[n] for n in OTHER])
    with tree_depth(10):
        inside_10 = within(list(groups.values()), splits)
        cross_10 = across([groups[n] for n in TRAIN], [groups[n] for n in OTHER])
    counts = ", ".join(f"{name} {len(g[1])}" for name, g in groups.items())
    print(f"cost model (max_depth {depth}) on random candidates measured here ({counts}; {database})")
    report(f"within a workload, {splits} random splits with 25% held out:", names, inside, inside_10)
    report(
        f"across workloads, trained on {' + '.join(TRAIN)}, ranking random {CROSS_SET}-candidate sets "
        f"({CROSS_SEEDS} seeds):",
        names,
        cross,
        cross_10,
    )
