"""Building and timing candidates: precise timing, verification against numpy, process isolation."""

from runner.confirm import Confirmed, Measured, confirm, measure_confirming, would_be_best
from runner.evaluate import evaluate
from runner.local import LocalRunner, LocalRunnerConfig
from runner.null import NullRunner
from runner.results import (
    MODEL_TIMING,
    BuildResult,
    Candidate,
    Runner,
    RunResult,
    Status,
    TimingConfig,
    TimingKind,
)

__all__ = [
    "MODEL_TIMING",
    "BuildResult",
    "Candidate",
    "Confirmed",
    "LocalRunner",
    "LocalRunnerConfig",
    "Measured",
    "NullRunner",
    "RunResult",
    "Runner",
    "Status",
    "TimingConfig",
    "TimingKind",
    "confirm",
    "evaluate",
    "measure_confirming",
    "would_be_best",
]
