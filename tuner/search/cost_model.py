"""XGBoost cost model: scores candidates by predicted normalized throughput, so the search measures
the promising ones first.

A candidate is a matrix of per-store feature rows (`tuner.search.features`), as many rows as its program has
stores. The model sees one fixed-length vector per candidate, [sum, max, mean] of its rows, and is
trained with plain squared error. TVM's XGBModel instead sums the trees' outputs over the rows
("pack-sum", a custom objective on grouped rows). Both were measured on random matmul schedules of
four shapes (160 candidates each; 10 random 60/40 splits for "within", leave-one-shape-out for
"cross"; top-k as in `evaluate_ranking`, 1.0 = perfect):

    labels                          aggregation       within top-1 / top-5   cross top-1 / top-5
    real timings (2 runs, 2 cores)  [sum, max, mean]  0.69 / 0.90            0.53 / 0.79
                                    pack-sum          0.61-0.67 / 0.87       0.47-0.49 / 0.70-0.73
    synthetic formula of the tiles  [sum, max, mean]  0.97 / 1.00            0.99 / 1.00
                                    pack-sum          0.94-0.95 / 0.99       0.93-0.99 / 1.00
    random ranking                                    0.16-0.22 / 0.43-0.48

The pack-sum ranges cover weighting each candidate by its label (as TVM does), by 1, and by label +
0.1. Pack-sum stopped improving on the held-out slice within 8-24 rounds on data this small; the
vector ranks better and needs no custom objective, so the vector it is.

Trees are 4 deep, not TVM's 10: a tuning run has a few hundred candidates, not TVM's thousands. From
`python -m bench cost_model`: random candidates measured on this machine (320 each of matmul 512^3
and conv2d 64ch 56x56, 240 each of matmul 384^3 and conv2d 32ch 28x28); "within" holds 25% of each
workload out (30 splits), "across" trains on the first two workloads and ranks random 60-candidate
sets of the other two (5 seeds); differences are paired, mean +- standard error:

    depth 10 -> 4              top-1                       top-5
    within matmul 512^3        0.49 -> 0.47 (-0.02 +- .05)  0.78 -> 0.77 (-0.01 +- .04)
    within conv2d 64ch         0.54 -> 0.62 (+0.08 +- .06)  0.83 -> 0.88 (+0.04 +- .04)
    within matmul 384^3        0.49 -> 0.53 (+0.04 +- .05)  0.85 -> 0.83 (-0.02 +- .03)
    within conv2d 32ch         0.46 -> 0.51 (+0.05 +- .05)  0.66 -> 0.71 (+0.05 +- .04)
    across matmul 384^3        0.42 -> 0.56 (+0.14 +- .04)  0.78 -> 0.80 (+0.02 +- .04)
    across conv2d 32ch         0.51 -> 0.56 (+0.05 +- .04)  0.79 -> 0.80 (+0.01 +- .02)

A random ranking scores 0.21-0.30 top-1 and 0.47-0.62 top-5 on these sets. Also tried, on the same
kind of data, and not taken for want of a clear gain: depth 6; a pairwise ranking objective
(rank:pairwise, one query group per workload: +0.03 to +0.15 top-1 within a workload, but top-5 -0.07
to +0.11 and no better across workloads); eta 0.1; min_child_weight 3; sum or [sum, max, mean, min]
as the aggregation.

Labels are normalized per workload group, y = best seconds in the group / seconds (a failure is 0), so
records of other workloads can warm-start the model without their absolute speeds mattering.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xgboost as xgb

Group = tuple[str, Sequence[np.ndarray], Sequence[float | None]]

XGB_PARAMS = {
    "objective": "reg:squarederror",
    "max_depth": 4,  # TVM's 10 overfits the few hundred candidates a tuning run has (see above)
    "eta": 0.2,
    "gamma": 0.001,
    "min_child_weight": 1,
    "tree_method": "hist",
    "verbosity": 0,
}
MAX_ROUNDS = 300
EARLY_STOPPING_ROUNDS = 20
HOLDOUT_FRACTION = 0.15
RETRAIN_GROWTH = 0.2


def _seconds(secs: float | None) -> float:
    """Seconds of a success, NaN for a failure; zero or non-finite times are failures (TVM #13354)."""
    return float(secs) if secs is not None and np.isfinite(secs) and secs > 0 else np.nan


def normalized_throughput(secs: Sequence[float | None]) -> np.ndarray:
    """The label of each candidate of one workload: the group's best seconds / its seconds, so 1.0
    is the best and a failure is 0."""
    t = np.array([_seconds(s) for s in secs], dtype=np.float64)
    ok = np.isfinite(t)
    if not ok.any():
        return np.zeros(len(t))
    return np.where(ok, t[ok].min() / np.where(ok, t, 1.0), 0.0)


@dataclass
class _WorkloadRecords:
    vectors: list[np.ndarray] = field(default_factory=list)  # one aggregated vector per candidate
    secs: list[float] = field(default_factory=list)  # NaN for a failure


class CostModel:
    """Predicts, for each candidate's feature matrix, a score where higher means faster.

    Until `min_train_samples` candidates have been seen and a model trained, predict() returns
    uniform random scores (from the model's own seeded generator): the warm-up, as in TVM. After
    that, update() retrains from scratch whenever the data has grown by RETRAIN_GROWTH since the
    last training.

    `nthread` is XGBoost's thread count. One is the default because training on a few thousand
    candidates is too small to share: on 2 cores, 2000 candidates trained in 0.44-0.57 s with one
    thread and 1.0-1.35 s with two, and when the cores are busy (builds and measurements run
    alongside) two threads spinning at OpenMP barriers took 6 s for 3 rounds instead of 0.04 s."""

    def __init__(self, seed: int = 0, min_train_samples: int = 64, nthread: int = 1) -> None:
        if min_train_samples < 2:
            raise ValueError("min_train_samples must be at least 2 (training holds some out)")
        self.seed = seed
        self.min_train_samples = min_train_samples
        self.nthread = nthread
        self._rng = np.random.default_rng(seed)
        self._records: dict[str, _WorkloadRecords] = {}
        self._booster: xgb.Booster | None = None
        self._trained_on = 0
        self._n_columns: int | None = None

    @property
    def is_trained(self) -> bool:
        return self._booster is not None

    @property
    def num_samples(self) -> int:
        return sum(len(r.secs) for r in self._records.values())

    def update(self, groups: Sequence[Group]) -> None:
        """Add measured candidates: (workload key, feature matrices, median seconds or None for a
        failure), and retrain when due."""
        for key, features, secs in groups:
            if len(features) != len(secs):
                raise ValueError(f"group {key!r}: {len(features)} feature matrices but {len(secs)} timings")
            records = self._records.setdefault(key, _WorkloadRecords())
            records.vectors.extend(self._aggregate(features))
            records.secs.extend(_seconds(s) for s in secs)
        n = self.num_samples
        if n >= self.min_train_samples and (
            not self.is_trained or n >= (1 + RETRAIN_GROWTH) * self._trained_on
        ):
            self._train()

    def predict(self, features: Sequence[np.ndarray]) -> np.ndarray:
        """One score per candidate; higher = faster (about 1.0 for the best seen, 0 for failures)."""
        vectors = self._aggregate(features)
        if self._booster is None:
            return self._rng.uniform(size=len(features))
        return self._booster.predict(xgb.DMatrix(vectors, nthread=self.nthread))

    def save(self, path: str | Path) -> None:
        """Everything needed to go on: the trees, the training data and the random state."""
        meta = {
            "seed": self.seed,
            "min_train_samples": self.min_train_samples,
            "nthread": self.nthread,
            "trained_on": self._trained_on,
            "n_columns": self._n_columns,
            "rng": self._rng.bit_generator.state,
        }
        vectors = [v for r in self._records.values() for v in r.vectors]
        booster = bytes(self._booster.save_raw("ubj")) if self._booster is not None else b""
        with open(path, "wb") as f:
            np.savez_compressed(
                f,
                meta=np.array(json.dumps(meta)),
                keys=np.array(list(self._records), dtype=str),
                group_sizes=np.array([len(r.secs) for r in self._records.values()], dtype=np.int64),
                vectors=np.array(vectors, dtype=np.float32).reshape(len(vectors), 3 * (self._n_columns or 0)),
                secs=np.array([s for r in self._records.values() for s in r.secs], dtype=np.float64),
                booster=np.frombuffer(booster, dtype=np.uint8),
            )

    @classmethod
    def load(cls, path: str | Path) -> CostModel:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            model = cls(meta["seed"], meta["min_train_samples"], meta["nthread"])
            model._rng.bit_generator.state = meta["rng"]
            model._trained_on = meta["trained_on"]
            model._n_columns = meta["n_columns"]
            vectors, secs = list(data["vectors"]), data["secs"].tolist()
            start = 0
            for key, size in zip(data["keys"].tolist(), data["group_sizes"].tolist()):
                model._records[key] = _WorkloadRecords(
                    vectors[start : start + size], secs[start : start + size]
                )
                start += size
            if data["booster"].size:
                model._booster = xgb.Booster(
                    params={**XGB_PARAMS, "nthread": model.nthread},
                    model_file=bytearray(data["booster"].tobytes()),
                )
        return model

    def _aggregate(self, features: Sequence[np.ndarray]) -> np.ndarray:
        """[sum, max, mean] of each candidate's rows: one fixed-length vector per candidate."""
        out = []
        for x in features:
            x = np.asarray(x, dtype=np.float32)
            if x.ndim != 2 or len(x) == 0:
                raise ValueError(f"a candidate's features must be a non-empty matrix, got shape {x.shape}")
            if self._n_columns is None:
                self._n_columns = x.shape[1]
            elif x.shape[1] != self._n_columns:
                raise ValueError(f"features have {x.shape[1]} columns, the model was given {self._n_columns}")
            out.append(np.concatenate([x.sum(axis=0), x.max(axis=0), x.mean(axis=0)]))
        return np.array(out, dtype=np.float32).reshape(len(out), 3 * (self._n_columns or 0))

    def _train(self) -> None:
        """Fit from scratch on every record, stopping once a held-out slice of the candidates has not
        improved for EARLY_STOPPING_ROUNDS rounds."""
        vectors = np.array([v for r in self._records.values() for v in r.vectors], dtype=np.float32)
        labels = np.concatenate([normalized_throughput(r.secs) for r in self._records.values()])
        order = np.random.default_rng(self.seed).permutation(len(labels))
        n_holdout = max(1, round(HOLDOUT_FRACTION * len(labels)))
        valid, train = order[:n_holdout], order[n_holdout:]
        dtrain = xgb.DMatrix(vectors[train], label=labels[train], nthread=self.nthread)
        dvalid = xgb.DMatrix(vectors[valid], label=labels[valid], nthread=self.nthread)
        booster = xgb.train(
            {**XGB_PARAMS, "seed": self.seed, "nthread": self.nthread},
            dtrain,
            num_boost_round=MAX_ROUNDS,
            evals=[(dvalid, "holdout")],
            early_stopping_rounds=EARLY_STOPPING_ROUNDS,
            verbose_eval=False,
        )
        self._booster = booster[: booster.best_iteration + 1]
        self._trained_on = len(labels)


def evaluate_ranking(model: CostModel, workload_groups: Sequence[Group]) -> dict[str, float]:
    """How good the model's picks are on measured groups it has not trained on.

    For each group with a success, the top-k score is the best true throughput among the model's k
    highest-ranked candidates divided by the group's best (1.0 = the best candidate is among them);
    the scores are averaged over groups."""
    scores: dict[str, list[float]] = {"top1": [], "top5": []}
    for _, features, secs in workload_groups:
        labels = normalized_throughput(secs)
        if not labels.any():
            continue
        order = np.argsort(-model.predict(features), kind="stable")
        for k, name in ((1, "top1"), (5, "top5")):
            scores[name].append(float(labels[order[:k]].max()))
    return {name: float(np.mean(v)) if v else 0.0 for name, v in scores.items()}


def random_ranking(workload_groups: Sequence[Group]) -> dict[str, float]:
    """What `evaluate_ranking` expects of a random ranking, exactly: for each group, the mean over
    every k-subset of its candidates of the best label in it."""
    scores: dict[str, list[float]] = {"top1": [], "top5": []}
    for _, _, secs in workload_groups:
        labels = np.sort(normalized_throughput(secs))  # ascending: labels[i] is the best of a subset
        if not labels.any():  # whose other k - 1 members are among the i below it
            continue
        n = len(labels)
        for k, name in ((1, "top1"), (5, "top5")):
            k = min(k, n)
            weights = [math.comb(i, k - 1) for i in range(n)]
            scores[name].append(float(np.dot(labels, weights)) / math.comb(n, k))
    return {name: float(np.mean(v)) if v else 0.0 for name, v in scores.items()}
