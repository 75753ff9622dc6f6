"""Cost-model training data from the database: records replayed into programs, grouped by workload
and timing kind (each group's throughput is normalized on its own: a layer's cold time is not
compared with a kernel's warm one)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from compiler import ScheduleError, Target, Trace, TraceError
from compiler.workloads import workload_from_spec
from runner import Status, TimingKind
from tuner.database import Database, Record
from tuner.search.cost_model import CostModel, Group, evaluate_ranking, random_ranking
from tuner.search.features import extract_features


def group_key(workload_hash: str, timing_kind: str) -> str:
    """The cost-model group of a workload's records of one timing kind: the workload hash for warm
    records (a kernel's), "<hash>/<kind>" for the others."""
    return workload_hash if timing_kind == TimingKind.WARM else f"{workload_hash}/{timing_kind}"


def split_group_key(key: str) -> tuple[str, str]:
    """The workload hash and timing kind of a `group_key`."""
    workload_hash, _, kind = key.partition("/")
    return workload_hash, kind or TimingKind.WARM.value


def groups_from_records(records: list[Record], target: Target) -> list[Group]:
    """(group key, feature matrices, median seconds or None for a failure) per workload and timing
    kind (`group_key`), for the machine that measured them. A record whose trace no longer replays
    (written by an older version of the space) is skipped; any other error is a bug and propagates."""
    by_workload: dict[str, list[Record]] = {}
    for r in records:
        by_workload.setdefault(group_key(r.workload_hash, r.timing_kind), []).append(r)
    groups: list[Group] = []
    for key, recs in by_workload.items():
        func = workload_from_spec(recs[0].workload_spec).func
        feats, secs = [], []
        for r in recs:
            try:
                scheduled = Trace.from_json(r.trace).apply(func).func
            except (ScheduleError, TraceError):
                continue
            feats.append(extract_features(scheduled, target))
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


def evaluate_model(
    groups: list[Group], holdout: float = 0.25, seed: int = 0, splits: int = 1
) -> dict[str, Any]:
    """Train on part of every workload's candidates and score the ranking of the held-out rest, over
    `splits` random splits: top-1/top-5 (`evaluate_ranking`) overall and per workload, their standard
    deviation over the splits, and the exact expectation of a random ranking of the same held-out
    candidates. One split of a few dozen candidates says little: a lucky or unlucky pick moves top-1
    by tenths."""
    runs: list[dict[str, dict[str, float]]] = []
    for split in range(splits):
        rng = random.Random(seed + split)
        train, test = [], []
        for key, feats, secs in groups:
            order = list(range(len(feats)))
            rng.shuffle(order)
            cut = max(1, int(len(order) * holdout))
            test.append((key, [feats[i] for i in order[:cut]], [secs[i] for i in order[:cut]]))
            train.append((key, [feats[i] for i in order[cut:]], [secs[i] for i in order[cut:]]))
        model = CostModel(seed=seed + split, min_train_samples=2)
        model.update(train)
        run = {"all": {**evaluate_ranking(model, test), **_prefixed(random_ranking(test))}}
        for group in test:
            run[group[0]] = {**evaluate_ranking(model, [group]), **_prefixed(random_ranking([group]))}
        runs.append(run)
    scores: dict[str, Any] = _summary([r["all"] for r in runs])
    scores.update(
        candidates=sum(max(1, int(len(f) * holdout)) for _, f, _ in groups),
        workloads=len(groups),
        splits=splits,
        per_workload={
            key: {**_summary([r[key] for r in runs]), "candidates": len(feats)} for key, feats, _ in groups
        },
    )
    return scores


def _prefixed(scores: dict[str, float]) -> dict[str, float]:
    return {f"random_{k}": v for k, v in scores.items()}


def _summary(runs: list[dict[str, float]]) -> dict[str, float]:
    """Mean of each score over the splits, and the standard deviation of the model's."""
    out = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
    out.update({f"{k}_std": float(np.std([r[k] for r in runs])) for k in ("top1", "top5")})
    return out
