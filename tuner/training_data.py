"""Cost-model training data from the database: records replayed into programs, grouped by workload
(each workload's throughput is normalized on its own)."""

from __future__ import annotations

import random

from compiler import Trace
from compiler.workloads import workload_from_spec
from runner import Status
from tuner.cost_model import CostModel, Group, evaluate_ranking
from tuner.database import Database, Record
from tuner.features import extract_features


def groups_from_records(records: list[Record]) -> list[Group]:
    """(workload hash, feature matrices, median seconds or None for a failure) per workload."""
    by_workload: dict[str, list[Record]] = {}
    for r in records:
        by_workload.setdefault(r.workload_hash, []).append(r)
    groups = []
    for key, recs in by_workload.items():
        func = workload_from_spec(recs[0].workload_spec).func
        feats, secs = [], []
        for r in recs:
            try:
                scheduled = Trace.from_json(r.trace).apply(func).func
            except Exception:
                continue  # a record from an older version of the space may no longer replay
            feats.append(extract_features(scheduled))
            secs.append(r.median_secs if r.status == Status.OK.value else None)
        if feats:
            groups.append((key, feats, secs))
    return groups


def hardware_records(db: Database, hardware_key: str) -> list[Record]:
    """Every record measured on one kind of hardware, all workloads."""
    hardware = [h for h in db.hardware_list() if h.key == hardware_key]
    if not hardware:
        return []
    return [r for w in db.workloads() for r in db.records(workload_id=w.id, hardware_id=hardware[0].id)]


def evaluate_model(groups: list[Group], holdout: float = 0.25, seed: int = 0) -> dict[str, float]:
    """Train on part of every workload's candidates, score the ranking of the held-out rest; also
    the expected score of a random ranking of the same held-out candidates, for comparison."""
    rng = random.Random(seed)
    train, test = [], []
    for key, feats, secs in groups:
        order = list(range(len(feats)))
        rng.shuffle(order)
        cut = max(1, int(len(order) * holdout))
        test.append((key, [feats[i] for i in order[:cut]], [secs[i] for i in order[:cut]]))
        train.append((key, [feats[i] for i in order[cut:]], [secs[i] for i in order[cut:]]))
    model = CostModel(seed=seed, min_train_samples=2)
    model.update(train)
    scores = evaluate_ranking(model, test)
    random_model = CostModel(seed=seed + 1)  # untrained: uniform random scores
    chance = [evaluate_ranking(random_model, test) for _ in range(20)]
    scores.update({f"random_{k}": sum(c[k] for c in chance) / len(chance) for k in ("top1", "top5")})
    scores.update(candidates=sum(len(f) for _, f, _ in test), workloads=len(test))
    return scores
