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
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from compiler.target import Hardware
from compiler.workloads import WorkloadError
from tuner.baseline import numpy_seconds
from tuner.cli.service import database_url
from tuner.range_spec import RangedWorkload
from tuner.range_spec import ranged_workload as ranged_spec
from tuner.task_scheduler import WeightedWorkload, tune_tasks
from tuner.tune import gflops

RANGE = re.compile(r"^(?:([A-Za-z_]\w*):)?(\d+)\.\.(\d+)$")


def ranged_workload(args: argparse.Namespace) -> RangedWorkload | None:
    """The ranged workload the command line names (`op params`, `--script`), or None where no
    parameter is a range and the script declares no symbolic dimension."""
    sizes = _sizes(getattr(args, "sizes", None))
    if args.spec or args.script:
        given = [item for item in (args.op, *args.params) if item]  # a param may land in op's place
        ranged = [item for item in given if RANGE.match(item.partition("=")[2])]
        if ranged:
            raise WorkloadError(
                "params",
                f"{ranged[0]}: a range is an operator's parameter, beside no spec or script",
            )
        return ranged_spec(_script_spec(args.script, args.num_inputs), sizes) if args.script else None
    pairs = [item.partition("=") for item in args.params]
    ranged_at = [k for k, pair in enumerate(pairs) if RANGE.match(pair[2])]
    if not ranged_at:
        return None
    for name, sep, _ in pairs:
        if not sep:
            raise WorkloadError(f"params.{name}", "parameters are NAME=VALUE")
    names = [name for name, _, _ in pairs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise WorkloadError(f"params.{twice[0]}", "given twice")
    params: dict[str, Any] = {}
    dimension = None
    for name, _, text in pairs:
        found = RANGE.match(text)
        if found is None:
            params[name] = parameter_value(text)
        else:
            params[name] = [int(found.group(2)), int(found.group(3))]
            dimension = dimension or found.group(1)
    return ranged_spec({"op": args.op, "params": params, "dtype": args.dtype}, sizes, dimension=dimension)


def _script_spec(path: str, num_inputs: int | None) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise WorkloadError("script", f"cannot read {path}: {e}") from None
    return {"tvmscript": text} | ({"num_inputs": num_inputs} if num_inputs is not None else {})


def _sizes(given: str | None) -> list[int] | None:
    """--sizes 1,64,512."""
    if given is None:
        return None
    try:
        return [int(s) for s in given.split(",")]
    except ValueError:
        raise WorkloadError("sizes", f"--sizes takes sizes separated by commas, got {given!r}") from None


def parameter_value(text: str) -> Any:
    """A NAME=VALUE parameter's value: an int, a float, or the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def tune_ranged(args: argparse.Namespace, console: Console, hardware: Hardware) -> int:
    """Tune a RangedWorkload's sizes as one task set; a table (or --json) of each size's best."""
    ranged: RangedWorkload = args.workload
    if args.trials < len(ranged.sizes):
        console.print(
            f"[red]too few trials[/red]: {args.trials} for {len(ranged.sizes)} sizes; give at least one "
            "per size (--trials), or fewer sizes (--sizes)"
        )
        return 2
    if args.plot:
        console.print("[red]--plot[/red] draws one workload's curve; a range's sizes are in the table")
        return 2
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
