"""The `tuner` command line: tune a workload embedded (SQLite file, local runner), query the best
records, show a record's program and trace.

    tuner tune matmul M=512 N=512 K=512 --trials 64 [--json] [--plot curve.png]
    tuner tune matmul M=1..512 N=768 K=768 --trials 256 [--sizes 1,64,512] (`tuner.cli.ranges`)
    tuner best matmul M=512 N=512 K=512 [--top 5] [--hardware KEY] [--coordinator URL --token T]
    tuner show matmul M=512 N=512 K=512 [--rank 1] [--hardware KEY] [--coordinator URL --token T]
    tuner evaluate-model [--holdout 0.25] [--splits 10]
    tuner import model.onnx; tuner run model.onnx [--input x.npy] (`tuner.cli.models`)

and the service's commands (`tuner.cli.service`): serve, worker, token, hardware, submit, status;
(`tuner.cli.service_models`) submit-model, model-artifact. The whole command lives in this package.

A workload is an operator name and its parameters (`compiler.workloads`), `--spec '<JSON>'`, or
`--script kernel.py`: a PrimFunc in TVMScript (read, never run; `--num-inputs` if the inputs are not
the leading parameters no block writes).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from compiler import Trace
from compiler.target import host_hardware
from compiler.workloads import Workload, WorkloadError, workload_from_spec
from runner import TimingKind
from tuner.baseline import numpy_seconds
from tuner.cli.models import add_model_commands, add_target_option, hardware_or_report
from tuner.cli.ranges import RangedWorkload, parameter_value, ranged_workload, tune_ranged
from tuner.cli.service import (
    add_hardware_option,
    add_remote_options,
    add_service_commands,
    database_url,
    is_remote,
    remote_best,
    run_reporting_coordinator_errors,
)
from tuner.cli.service_models import add_model_service_commands
from tuner.database import Database
from tuner.search.training_data import evaluate_model, groups_from_records, hardware_records, split_group_key
from tuner.tune import DEFAULT_DATABASE, STRATEGIES, TuneResult, gflops, tune


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console(stderr=True)
    if args.takes_workload:
        try:
            args.workload = _ranged_or_single(args)
        except WorkloadError as e:
            console.print(f"[red]bad workload[/red]: {e}")
            return 2
    return run_reporting_coordinator_errors(args, console)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tuner", description="Auto-tune tensor programs.")
    sub = parser.add_subparsers(required=True, metavar="command")

    def command(name: str, help_text: str, *, workload: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        if workload:
            p.add_argument("op", nargs="?", help="operator name, e.g. matmul")
            p.add_argument("params", nargs="*", help="operator parameters as NAME=VALUE")
            p.add_argument("--spec", help="the workload as a JSON spec instead of op and params")
            p.add_argument("--script", help="the workload as a TVMScript file (a @T.prim_func function)")
            p.add_argument("--num-inputs", type=int, help="with --script: how many parameters are inputs")
            p.add_argument("--dtype", default="float32")
        p.add_argument("--database", help=f"SQLAlchemy URL (default {DEFAULT_DATABASE})")
        p.add_argument("--json", action="store_true", help="print a machine-readable summary")
        p.set_defaults(takes_workload=workload)
        return p

    p = command("tune", "search schedules of a workload and measure them on this machine")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--strategy", choices=STRATEGIES, default="evolutionary")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, help="candidates per batch (default: 16, then 32 after 64)")
    p.add_argument("--plot", help="write the best-so-far GFLOPS curve to this PNG file")
    p.add_argument("--no-baseline", action="store_true", help="skip measuring numpy")
    p.add_argument(
        "--sizes", help="with a range (M=1..512, or a symbolic script): the sizes to tune, e.g. 1,64,512"
    )
    add_target_option(p)
    p.set_defaults(run=_tune, takes_range=True)
    p = command("best", "the fastest known records of a workload (on this machine, or a coordinator's)")
    p.add_argument("--top", type=int, default=1)
    add_hardware_option(p)
    add_timing_option(p)
    add_remote_options(p)
    p.set_defaults(run=_best)
    p = command("show", "the program and trace of a record (the best by default)")
    p.add_argument("--rank", type=int, default=1, help="1 = the best record, 2 = the next, ...")
    add_hardware_option(p)
    add_timing_option(p)
    add_remote_options(p)
    p.set_defaults(run=_show)
    p = command("evaluate-model", "top-1/top-5 score of the cost model on held-out records", workload=False)
    p.add_argument("--holdout", type=float, default=0.25, help="share of each workload's records held out")
    p.add_argument("--splits", type=int, default=10, help="random train/held-out splits to average over")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=_evaluate_model)
    add_service_commands(command, embedded_tune=_tune)
    add_model_commands(command)
    add_model_service_commands(command)
    return parser


def _ranged_or_single(args: argparse.Namespace) -> Workload | RangedWorkload:
    """A range (`tuner.cli.ranges`) is tuned by `tune`; the other commands take one size."""
    ranged = ranged_workload(args)
    if ranged is not None and not getattr(args, "takes_range", False):
        raise WorkloadError(
            ranged.field, "a range is tuned with `tuner tune` or `tuner submit`; give this command a size"
        )
    if ranged is None and getattr(args, "sizes", None) is not None:
        raise WorkloadError(
            "sizes", "--sizes needs a parameter given as a range (M=1..512) or a symbolic script"
        )
    return ranged or _workload(args)


def _workload(args: argparse.Namespace) -> Workload:
    if args.script:
        return workload_from_spec(_script_spec(args.script, args.num_inputs))
    if args.spec:
        try:
            spec = json.loads(args.spec)
        except json.JSONDecodeError as e:
            raise WorkloadError("spec", f"not valid JSON: {e}") from None
        return workload_from_spec(spec)
    if not args.op:
        raise WorkloadError("op", "give an operator name (e.g. matmul), --spec or --script")
    params: dict[str, Any] = {}
    for item in args.params:
        name, sep, value = item.partition("=")
        if not sep:
            raise WorkloadError(f"params.{item}", "parameters are NAME=VALUE")
        params[name] = parameter_value(value)
    return workload_from_spec({"op": args.op, "params": params, "dtype": args.dtype})


def _script_spec(path: str, num_inputs: int | None) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise WorkloadError("script", f"cannot read {path}: {e}") from None
    spec: dict[str, Any] = {"tvmscript": text}
    if num_inputs is not None:
        spec["num_inputs"] = num_inputs
    return spec


def _tune(args: argparse.Namespace, console: Console) -> int:
    wl = args.workload
    hardware = hardware_or_report(args.target, console)
    if hardware is None:
        return 2
    if isinstance(wl, RangedWorkload):
        return tune_ranged(args, console, hardware)
    with Progress(
        TextColumn(f"tuning {wl.name}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("best {task.fields[best]:.1f} GFLOPS"),
        TimeElapsedColumn(),
        console=console,
        disable=args.json,
    ) as bar:
        task = bar.add_task("tune", total=args.trials, best=0.0)
        result = tune(
            wl,
            trials=args.trials,
            database=database_url(args),
            strategy=args.strategy,
            seed=args.seed,
            batch_size=args.batch_size,
            progress=lambda p: bar.update(task, completed=p.trials, best=p.best_gflops),
            hardware=hardware,
        )
    # A PrimFunc's reference is the IR interpreter, not numpy's kernels: no baseline to compare with.
    no_baseline = args.no_baseline or "primfunc" in wl.spec
    numpy_gflops = None if no_baseline else gflops(wl, numpy_seconds(wl.spec, target=hardware.target))
    summary = _summary(result, numpy_gflops)
    if args.plot:
        _plot(result, numpy_gflops, args.plot)
        summary["plot"] = args.plot
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        table = Table(
            title=f"{wl.name} on {result.hardware.cpu_model} ({result.hardware.target.cores} cores)"
        )
        table.add_column("")
        table.add_column("", justify="right")
        for key, value in _table_rows(summary):
            table.add_row(key, value)
        Console().print(table)
    return 0 if result.best else 1


def _summary(result: TuneResult, numpy_gflops: float | None) -> dict[str, Any]:
    best = result.best_gflops
    return {
        "workload": result.workload.name,
        "best_gflops": round(best, 2),
        "numpy_gflops": round(numpy_gflops, 2) if numpy_gflops else None,
        "ratio_to_numpy": round(best / numpy_gflops, 3) if numpy_gflops else None,
        "trials": result.trials,
        "wall_secs": round(result.wall_secs, 1),
        "search_overhead": round(result.search_secs / result.wall_secs, 3) if result.wall_secs else None,
        "best_record": result.best.id if result.best else None,
    }


def _table_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    def fmt(value: Any, pattern: str) -> str:
        return "-" if value is None else pattern.format(value)

    return [
        ("best", fmt(summary["best_gflops"], "{:.1f} GFLOPS")),
        ("numpy reference", fmt(summary["numpy_gflops"], "{:.1f} GFLOPS")),
        ("ratio to numpy", fmt(summary["ratio_to_numpy"], "{:.2f}x")),
        ("trials", str(summary["trials"])),
        ("wall time", fmt(summary["wall_secs"], "{:.0f} s")),
        ("search overhead", fmt(summary["search_overhead"], "{:.0%}")),
        ("best record", fmt(summary["best_record"], "#{}")),
    ]


def _plot(result: TuneResult, numpy_gflops: float | None, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(range(1, len(result.curve) + 1), result.curve, label="best so far")
    if numpy_gflops:
        ax.axhline(numpy_gflops, color="grey", linestyle="--", label="numpy")
    ax.set_xlabel("trials")
    ax.set_ylabel("GFLOPS")
    ax.set_title(f"{result.workload.name}: tuning curve")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def add_timing_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timing",
        choices=[k.value for k in TimingKind],
        default=TimingKind.WARM.value,
        help="rank records timed this way: warm (a kernel in a loop), layer (as a model runs it)",
    )


def _records(args: argparse.Namespace, wl: Workload, k: int) -> list:
    db = Database.open(database_url(args))
    try:
        return db.top_k(
            wl.func.structural_hash(), args.hardware or host_hardware().key, k, timing_kind=args.timing
        )
    finally:
        db.close()


def _best(args: argparse.Namespace, console: Console) -> int:
    wl = args.workload
    rows: list[dict[str, Any]]
    if is_remote(args):
        rows = [  # /v1/best ranks timed records only: the `or 0.0` is for the type checker
            {
                "record": r.id,
                "gflops": round(r.gflops or 0.0, 2),
                "median_secs": r.median_secs,
                "trace": r.trace,
            }
            for r in remote_best(args, wl.spec, args.top)
        ]
    else:
        rows = [
            {"record": r.id, "gflops": round(gflops(wl, r.median_secs), 2), "median_secs": r.median_secs}
            for r in _records(args, wl, args.top)
        ]
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        console.print(f"no measured schedule of {wl.name} on this machine; run `tuner tune` first")
    else:
        table = Table(title=f"best records of {wl.name}")
        for key in ("record", "GFLOPS", "median"):
            table.add_column(key, justify="right")
        for row in rows:
            table.add_row(f"#{row['record']}", f"{row['gflops']:.1f}", f"{row['median_secs'] * 1e3:.3f} ms")
        Console().print(table)
    return 0 if rows else 1


def _show(args: argparse.Namespace, console: Console) -> int:
    wl = args.workload
    if is_remote(args):
        records = [(r.id, r.trace, r.median_secs) for r in remote_best(args, wl.spec, args.rank)]
    else:
        records = [(r.id, r.trace, r.median_secs) for r in _records(args, wl, args.rank)]
    if len(records) < args.rank:
        console.print(f"fewer than {args.rank} measured schedules of {wl.name}")
        return 1
    record_id, trace, median = records[args.rank - 1]
    sch = Trace.from_json(trace).apply(wl.func)
    if args.json:
        print(json.dumps({"record": record_id, "trace": trace, "program": sch.func.script()}))
        return 0
    print(f"# record {record_id}: {gflops(wl, median):.1f} GFLOPS")
    print(sch.func.script())
    print(sch.trace)
    return 0


def _group_name(key: str, names: dict[str, str]) -> str:
    """A cost-model group's workload by name, and its timing kind unless warm."""
    workload_hash, kind = split_group_key(key)
    name = names.get(workload_hash, workload_hash[:12])
    return name if kind == TimingKind.WARM else f"{name} ({kind})"


def _evaluate_model(args: argparse.Namespace, console: Console) -> int:
    db = Database.open(database_url(args))
    try:
        host = host_hardware()
        groups = groups_from_records(hardware_records(db, host.key), host.target)
        names = {  # the name alone does not tell two shapes of one operator apart
            w.hash: f"{w.name} " + " ".join(f"{k}={v}" for k, v in w.spec.get("params", {}).items())
            for w in db.workloads()
        }
    finally:
        db.close()
    if not groups:
        console.print("no records on this machine's hardware; run `tuner tune` first")
        return 1
    scores = evaluate_model(groups, holdout=args.holdout, seed=args.seed, splits=args.splits)
    if args.json:
        print(json.dumps(scores, indent=2))
        return 0
    table = Table(
        title=f"cost model: {scores['splits']} random splits, {args.holdout:.0%} of each workload held out",
        caption="± is the standard deviation over the splits; random = the exact score of a random ranking",
    )
    for column in ("workload", "records", "top-1", "random", "top-5", "random "):
        table.add_column(column, justify="left" if column == "workload" else "right")
    rows = [(_group_name(key, names), s["candidates"], s) for key, s in scores["per_workload"].items()]
    for name, count, s in [*rows, ("all (mean)", sum(r[1] for r in rows), scores)]:
        table.add_row(
            name,
            str(count),
            f"{s['top1']:.2f} ± {s['top1_std']:.2f}",
            f"{s['random_top1']:.2f}",
            f"{s['top5']:.2f} ± {s['top5_std']:.2f}",
            f"{s['random_top5']:.2f}",
        )
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
