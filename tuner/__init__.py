"""The auto-tuner: search space, search strategies, cost model, database, coordinator and CLI."""

from tuner.model_tuning import ModelTuneResult, tune_model
from tuner.tune import TuneResult, compile_best, tune

__all__ = ["ModelTuneResult", "TuneResult", "compile_best", "tune", "tune_model"]
