"""Building and timing candidates: precise timing, verification against numpy, process isolation."""

from runner.confirm import Confirmed, Incumbent, Measured, Versus, confirm, measure_confirming, would_be_best
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
    cutoff_above,
)

__all__ = [
    "MODEL_TIMING",
    "BuildResult",
    "Candidate",
    "Confirmed",
    "Incumbent",
    "LocalRunner",
    "LocalRunnerConfig",
    "Measured",
    "NullRunner",
    "RunResult",
    "Runner",
    "Status",
    "TimingConfig",
    "TimingKind",
    "Versus",
    "confirm",
    "cutoff_above",
    "evaluate",
    "measure_confirming",
    "would_be_best",
]
