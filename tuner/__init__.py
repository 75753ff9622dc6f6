"""The auto-tuner: search space, search strategies, cost model, database, coordinator and CLI."""

from tuner.best import build_model, compile_best
from tuner.model_tuning import ModelTuneResult, tune_model
from tuner.range_tuning import RangeTuneResult, compile_range, tune_range
from tuner.tune import TuneResult, tune, tune_tir

__all__ = [
    "ModelTuneResult",
    "RangeTuneResult",
    "TuneResult",
    "build_model",
    "compile_best",
    "compile_range",
    "tune",
    "tune_model",
    "tune_range",
    "tune_tir",
]
