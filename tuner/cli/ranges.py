"""`tuner tune` over a range of one dimension (issue 40): `tuner tune matmul M=1..512 N=768 K=768`
(or `M=n:1..512`), or `--script kernel.py` whose function declares `n = T.size_var(1, 512)`. The
workload is tuned at a few sizes spread over the range (`--sizes 1,64,512` to choose them) as one
task set: one budget, spent where the sum of the sizes' latencies gains most, and one cost model
(`tuner.task_scheduler`, as `tuner.range_tuning` does for a PrimFunc). Each size is an ordinary
workload: `tuner best matmul M=64 N=768 K=768` and `tuner.compile_range` read its records.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from compiler.graph.shape_family import size_between
from compiler.serialize import to_json
from compiler.target import Hardware
from compiler.workloads import Workload, WorkloadError, workload_from_spec
from compiler.workloads.primfunc_spec import leading_inputs, primfunc_workload
from compiler.workloads.script_spec import script_function
from tuner.baseline import numpy_seconds
from tuner.cli.service import database_url
from tuner.range_tuning import RANGE_SIZES
from tuner.task_scheduler import WeightedWorkload, tune_tasks
from tuner.tune import gflops

RANGE = re.compile(r"^(?:([A-Za-z_]\w*):)?(\d+)\.\.(\d+)$")


@dataclass(frozen=True)
class RangedWorkload:
    """A workload at sizes of one dimension over its range: (size, the workload at that size)."""

    name: str
    dimension: str
    low: int
    high: int
    sizes: tuple[tuple[int, Workload], ...]


def ranged_workload(
    op: str | None, params: list[str], script: str | None, sizes: str | None, dtype: str
) -> RangedWorkload | None:
    """The ranged workload the command line names, or None where no parameter is a range and the
    script declares no symbolic dimension."""
    if script is not None:
        return _ranged_script(script, sizes)
    pairs = [item.partition("=") for item in params]
    ranged = [(k, pair) for k, pair in enumerate(pairs) if RANGE.match(pair[2])]
    if not ranged:
        return None
    if len(ranged) > 1:
        names = ", ".join(p[0] for _, p in ranged)
        raise WorkloadError(
            f"params.{ranged[1][1][0]}", f"one parameter may be a range, got ranges for {names}"
        )
    k, (key, _, value) = ranged[0]
    found = RANGE.match(value)
    assert found is not None
    low, high = int(found.group(2)), int(found.group(3))
    chosen = _sizes(f"params.{key}", low, high, sizes)
    fixed = {name: _number(text) for j, (name, _, text) in enumerate(pairs) if j != k}
    out = []
    for size in chosen:
        spec = {"op": op, "params": {**fixed, key: size}, "dtype": dtype}
        out.append((size, workload_from_spec(spec)))
    return RangedWorkload(f"{op} {key}={low}..{high}", found.group(1) or key, low, high, tuple(out))


def _ranged_script(path: str, sizes: str | None) -> RangedWorkload | None:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise WorkloadError("script", f"cannot read {path}: {e}") from None
    func = script_function(text)
    if not func.size_vars:
        return None
    if len(func.size_vars) > 1:
        names = ", ".join(v.name for v in func.size_vars)
        raise WorkloadError(
            "script", f"a range is tuned over one symbolic dimension; {func.name} has {names}"
        )
    var = func.size_vars[0]
    inputs = leading_inputs(func)
    out = [
        (size, primfunc_workload(to_json(func.specialize({var: size})), inputs))
        for size in _sizes("script", var.lo, var.hi, sizes)
    ]
    return RangedWorkload(f"{func.name} {var.name}={var.lo}..{var.hi}", var.name, var.lo, var.hi, tuple(out))


def _sizes(field: str, low: int, high: int, given: str | None) -> list[int]:
    if low < 1 or low > high:
        raise WorkloadError(field, f"a range LOW..HIGH needs 1 <= LOW <= HIGH, got {low}..{high}")
    if given is None:
        return sorted({size_between(low, high, k / (RANGE_SIZES - 1)) for k in range(RANGE_SIZES)})
    try:
        sizes = sorted({int(s) for s in given.split(",")})
    except ValueError:
        raise WorkloadError("sizes", f"--sizes takes sizes separated by commas, got {given!r}") from None
    outside = [s for s in sizes if not low <= s <= high]
    if outside:
        raise WorkloadError("sizes", f"sizes {outside} are outside the range {low}..{high}")
    return sizes


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def tune_ranged(args: argparse.Namespace, console: Console, hardware: Hardware) -> int:
    """Tune a RangedWorkload's sizes as one task set; a table (or --json) of each size's best."""
    ranged: RangedWorkload = args.workload
    with Progress(
        TextColumn(f"tuning {ranged.name} at {len(ranged.sizes)} sizes"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=args.json,
    ) as bar:
        task = bar.add_task("tune", total=args.trials)
        result = tune_tasks(
            [WeightedWorkload(wl) for _, wl in ranged.sizes],
            trials=args.trials,
            database=database_url(args),
            strategy=args.strategy,
            seed=args.seed,
            batch_size=args.batch_size or 16,
            progress=lambda p: bar.update(task, completed=p.trials),
            hardware=hardware,
        )
    rows: list[dict[str, Any]] = []
    for (size, wl), tuned in zip(ranged.sizes, result.results):
        baseline = None
        if not args.no_baseline and "primfunc" not in wl.spec:
            baseline = gflops(wl, numpy_seconds(wl.spec, target=hardware.target))
        rows.append(
            {
                "size": size,
                "trials": tuned.trials,
                "best_gflops": round(tuned.best_gflops, 2),
                "numpy_gflops": round(baseline, 2) if baseline else None,
                "best_record": tuned.best.id if tuned.best else None,
            }
        )
    summary = {
        "workload": ranged.name,
        "dimension": ranged.dimension,
        "sizes": rows,
        "trials": sum(r["trials"] for r in rows),
        "wall_secs": round(result.wall_secs, 1),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        Console().print(_table(summary, hardware))
    return 0 if all(r["best_record"] is not None for r in rows) else 1


def _table(summary: dict[str, Any], hardware: Hardware) -> Table:
    table = Table(
        title=f"{summary['workload']} on {hardware.cpu_model} ({hardware.target.cores} cores), "
        f"{summary['trials']} trials in {summary['wall_secs']:.0f} s"
    )
    for column in (summary["dimension"], "trials", "best GFLOPS", "numpy GFLOPS", "best record"):
        table.add_column(column, justify="right")
    for r in summary["sizes"]:
        numpy = "-" if r["numpy_gflops"] is None else f"{r['numpy_gflops']:.1f}"
        record = "-" if r["best_record"] is None else f"#{r['best_record']}"
        table.add_row(str(r["size"]), str(r["trials"]), f"{r['best_gflops']:.1f}", numpy, record)
    return table
