"""Run the benchmarks: `python -m bench [name ...]` (all by default). Results print as ratios
measured side by side in this one process; record quoted numbers in bench/results/ (and the summary,
bench/RESULTS.md)."""

import os

# Honest baseline: this environment may force OpenBLAS onto its AVX2 kernels, which halves numpy's
# matmul. It must be removed before numpy (imported by everything below) loads OpenBLAS.
os.environ.pop("OPENBLAS_CORETYPE", None)

import sys

from bench import (
    best_query,
    build_cost,
    call_cost,
    compute_location,
    conv2d,
    conv_layout,
    coordinator,
    cost_model,
    default_schedule,
    dense_layout,
    dynamic_lengths,
    fleet_soak,
    fusion_speed,
    matmul,
    model_latency,
    model_service,
    model_tuning,
    models,
    onnx_attention,
    range_tuning,
    recovery,
    register_tile,
    rfactor,
    runner_throughput,
    search_cost,
    symbolic_kernels,
    tensorize,
    tuning,
    vector_math,
)

BENCHMARKS = {
    "matmul": matmul.main,
    "conv2d": conv2d.main,
    "build_cost": build_cost.main,
    "call_cost": call_cost.main,
    "runner": runner_throughput.main,
    "tuning": tuning.main,
    "models": models.main,
    "fusion_speed": fusion_speed.main,
    "model_latency": model_latency.main,
    "model_tuning": model_tuning.main,
    "compute_location": compute_location.main,
    "cost_model": cost_model.main,
    "search_cost": search_cost.main,
    "coordinator": coordinator.main,
    "best_query": best_query.main,
    "register_tile": register_tile.main,
    "default_schedule": default_schedule.main,
    "vector_math": vector_math.main,
    "rfactor": rfactor.main,
    "tensorize": tensorize.main,
    "onnx_attention": onnx_attention.main,
    "symbolic_kernels": symbolic_kernels.main,
    "dynamic_lengths": lambda: dynamic_lengths.main([]),
    "range_tuning": lambda: range_tuning.main([]),
    "conv_layout": conv_layout.main,
    "dense_layout": dense_layout.main,
    "fleet_soak": lambda: fleet_soak.main([]),  # their defaults; `python -m bench.<name> --help` for more
    "recovery": lambda: recovery.main([]),
    "model_service": lambda: model_service.main([]),
}


def main(names: list[str]) -> None:
    """Every name is checked before any benchmark runs: a typo or an option (which only
    `python -m bench.<name>` takes) must not cost a long run before the error."""
    for name in names:
        if name.startswith("-"):
            raise SystemExit(f"{name}: options go to one benchmark: `python -m bench.<name> {name} ...`")
        if name not in BENCHMARKS:
            raise SystemExit(f"unknown benchmark {name!r}; choose from {sorted(BENCHMARKS)}")
    for name in names or list(BENCHMARKS):
        print(f"== {name}")
        BENCHMARKS[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
