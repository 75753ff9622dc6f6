"""Building and timing candidates: precise timing, verification against numpy, process isolation."""

from runner.confirm import Measured, measure_confirming
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
    "LocalRunner",
    "LocalRunnerConfig",
    "Measured",
    "NullRunner",
    "RunResult",
    "Runner",
    "Status",
    "TimingConfig",
    "TimingKind",
    "evaluate",
    "measure_confirming",
]
