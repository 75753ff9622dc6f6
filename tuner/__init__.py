"""The auto-tuner: search space, search strategies, cost model, database, coordinator and CLI."""

from tuner.tune import TuneResult, compile_best, tune

__all__ = ["TuneResult", "compile_best", "tune"]
