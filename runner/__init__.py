"""Building and timing candidates: precise timing, verification against numpy, process isolation."""

from runner.evaluate import evaluate
from runner.local import LocalRunner, LocalRunnerConfig
from runner.null import NullRunner
from runner.results import Candidate, RunResult, Status, TimingConfig, merge_remeasurement

__all__ = [
    "Candidate",
    "LocalRunner",
    "LocalRunnerConfig",
    "NullRunner",
    "RunResult",
    "Status",
    "TimingConfig",
    "evaluate",
    "merge_remeasurement",
]
