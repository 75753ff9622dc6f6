"""The `tuner` commands for whole models: import one (print its optimized graph and task table), run
one compiled (latency next to the reference runtime's), tune every layer under one budget, and export
the compiled model as a shared library with a C header.

    tuner import model.onnx [--unoptimized]
    tuner run model.onnx [--input x.npy ...] [--database URL] [--repeat 20]
    tuner tune-model model.onnx --trials 2000 [--database URL] [--plot curve.png]
    tuner export model.onnx -o model.so [--database URL]

A model is an ONNX file (`.onnx`) or a PyTorch program saved with `torch.export.save` (`.pt2`).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from compiler import frontend, graph
from compiler.graph import CompiledModel, GraphError, Module, ShapeFamily, ValueFamily
from compiler.graph.passes import ExtractedTask
from compiler.graph.shape_family import DimSpec
from compiler.target import Hardware, Target, host_hardware
from tuner.best import build_model
from tuner.task_scheduler import SCHEDULERS, BatchProgress
from tuner.tune import DEFAULT_DATABASE

if TYPE_CHECKING:
    from tuner.model_tuning import ModelTuneResult

Handler = Callable[[argparse.Namespace, Console], int]
CommandFactory = Callable[..., argparse.ArgumentParser]


def add_model_commands(command: CommandFactory) -> None:
    p = command(
        "import", "import a model (ONNX or torch.export .pt2): its optimized graph and tasks", workload=False
    )
    p.add_argument("model", help="an .onnx file or a .pt2 file saved by torch.export.save")
    p.add_argument(
        "--unoptimized", action="store_true", help="print the graph as imported, before the passes"
    )
    add_dim_option(p)
    p.set_defaults(run=_import)
    p = command(
        "run", "run a model compiled on this machine; latency next to the reference runtime", workload=False
    )
    p.add_argument("model", help="an .onnx file or a .pt2 file saved by torch.export.save")
    p.add_argument(
        "--input", action="append", default=[], help="an input as a .npy file (in order; default random)"
    )
    p.add_argument("--repeat", type=int, default=20, help="timed forward passes (default 20)")
    p.add_argument("--seed", type=int, default=0)
    add_dim_option(p)
    add_target_option(p)
    p.set_defaults(run=_run)
    p = command(
        "tune-model", "tune every layer of a model under one trial budget, then run it", workload=False
    )
    p.add_argument("model", help="an .onnx file or a .pt2 file saved by torch.export.save")
    p.add_argument("--trials", type=int, default=2000, help="measurements shared by all layers")
    p.add_argument("--scheduler", choices=SCHEDULERS, default="gradient")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--repeat", type=int, default=20, help="timed forward passes (default 20)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", help="write the estimated and measured latency against trials to this PNG")
    add_dim_option(p)
    add_target_option(p)
    p.set_defaults(run=_tune_model)
    p = command(
        "export", "compile a model with the database's best records into a shared library", workload=False
    )
    p.add_argument("model", help="an .onnx file or a .pt2 file saved by torch.export.save")
    p.add_argument("-o", "--output", required=True, help="the library to write (a header goes beside it)")
    add_dim_option(p)
    add_target_option(p)
    p.set_defaults(run=_export)


def add_dim_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dim",
        action="append",
        default=[],
        type=_dim,
        metavar="NAME=SIZE|MIN..MAX|OTHER",
        help="a size or a range for a dimension the model leaves open: sequence_length=128, "
        "batch=1..16, input_ids:1=1..512 (an unnamed one: input:axis), attention_mask:1=sequence",
    )


def _dim(text: str) -> tuple[str, DimSpec]:
    name, sep, value = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"{text!r}: the dimension's name comes before '='")
    low, dots, high = value.partition("..")
    try:
        if dots:
            return name, (int(low), int(high))
        return name, int(value)
    except ValueError:
        if sep and name and value and not dots:
            return name, value
    raise argparse.ArgumentTypeError(f"{text!r}: NAME=SIZE, NAME=MIN..MAX or NAME=OTHER_NAME")


def add_target_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target",
        help="build and measure for another CPU's subset of this machine's features: CPU[,+F|-F...], "
        "e.g. znver3 (AVX2 on an AVX-512 host) or x86-64-v3,-fma; records are kept apart",
    )


def hardware_or_report(target: str | None, console: Console) -> Hardware | None:
    """This machine, or this machine emulating `target`; None (reported) for a bad target."""
    try:
        return host_hardware(target)
    except ValueError as e:
        console.print(f"[red]bad target[/red]: {escape(str(e))}", soft_wrap=True)
        return None


def _import(args: argparse.Namespace, console: Console) -> int:
    loaded = _load_or_report(args.model, args.dim, console)
    if loaded is None:
        return 2
    if isinstance(loaded, ShapeFamily):
        largest = {d.name: d.max for d in loaded.dims}
        console.print(f"inputs {loaded}; the graph and tasks at the largest sizes {largest}:", soft_wrap=True)
        try:
            module = loaded.specialize(largest)
        except GraphError as e:
            console.print(f"[red]cannot import[/red] at {largest}: {escape(str(e))}", soft_wrap=True)
            return 2
    else:
        module = loaded
    if args.unoptimized:
        print(module.script())
        return 0
    optimized = graph.optimize(module)
    print(optimized.script())
    Console().print(task_table(optimized))
    return 0


def task_table(module: Module) -> Table:
    tasks = graph.extract_tasks(module)
    table = Table(title=f"{len(tasks)} tasks", caption="weight = calls per forward pass")
    for column in ("task", "weight", "GFLOP", "shape", "ops"):
        table.add_column(column, justify="right" if column in ("weight", "GFLOP") else "left")
    for t in tasks:
        table.add_row(t.name, str(t.weight), f"{t.flops / 1e9:.4f}", t.shape, " + ".join(t.ops))
    total = sum(t.flops * t.weight for t in tasks)
    table.add_row("all", str(sum(t.weight for t in tasks)), f"{total / 1e9:.4f}", "", "")
    return table


def _run(args: argparse.Namespace, console: Console) -> int:
    loaded = _load_or_report(args.model, args.dim, console)
    hardware = hardware_or_report(args.target, console)
    if loaded is None or hardware is None:
        return 2
    files = [np.load(f) for f in args.input]
    try:
        for sizes, module in _bindings(loaded, files, console):
            inputs = _inputs(module, files, np.random.default_rng(args.seed))
            _run_module(args, module, inputs, hardware, sizes, console)
    except (GraphError, ValueError) as e:  # a family's size outside it, or one it cannot import at
        console.print(f"[red]cannot run[/red] {escape(args.model)}: {escape(str(e))}", soft_wrap=True)
        return 2
    return 0


def _bindings(
    loaded: Module | ShapeFamily, files: Sequence[np.ndarray], console: Console
) -> list[tuple[str, Module]]:
    """The static modules to run, each with the sizes it binds: a family runs at the sizes of the
    given inputs, else at three sizes spread over its ranges."""
    if isinstance(loaded, Module):
        return [("", loaded)]
    console.print(f"inputs {loaded}", soft_wrap=True)
    bindings = [loaded.bind([f.shape for f in files])] if files else loaded.spread(3)
    return [(", ".join(f"{k}={v}" for k, v in b.items()), loaded.specialize(b)) for b in bindings]


def _run_module(
    args: argparse.Namespace,
    module: Module,
    inputs: list[np.ndarray],
    hardware: Hardware,
    sizes: str,
    console: Console,
) -> None:
    start = time.perf_counter()
    module = graph.optimize(module)
    if args.database is None:
        model = graph.build(module, target=hardware.target)
    else:
        model = build_model(module, database=args.database, hardware=hardware)
    tuned = sum(s.origin == "given" for s in model.sources)
    console.print(
        f"built {len(model.sources)} kernels ({tuned} tuned, {len(model.sources) - tuned} default) "
        f"in {time.perf_counter() - start:.1f} s; intermediates {model.peak_bytes / 1e6:.3f} MB "
        f"(unplanned {model.plan.total_bytes / 1e6:.3f} MB)",
        soft_wrap=True,
    )
    ours = latencies(lambda: model(*inputs), args.repeat)
    rows = [("tensor-tuner", ours)]
    reference, run = _reference_runner(args.model, inputs)
    error = _max_error(model(*inputs), run())
    time.sleep(0.3)  # the other runtime's idle threads spin for a while after its last call
    rows.append((reference, latencies(run, args.repeat)))
    at = f" at {sizes}" if sizes else ""
    table = Table(title=f"{Path(args.model).name}{at}: latency of one forward pass ({args.repeat} runs)")
    for column in ("runtime", "median ms", "min ms", "max ms", "vs tensor-tuner"):
        table.add_column(column, justify="left" if column == "runtime" else "right")
    for name, times in rows:
        ratio = statistics.median(times) / statistics.median(ours)
        table.add_row(
            name,
            f"{statistics.median(times) * 1e3:.3f}",
            f"{min(times) * 1e3:.3f}",
            f"{max(times) * 1e3:.3f}",
            f"{ratio:.2f}x",
        )
    Console().print(table)
    console.print(
        f"largest difference from {reference}'s outputs: {error:.1e} of their largest magnitude",
        soft_wrap=True,
    )


def _max_error(ours: Sequence[np.ndarray], theirs: object) -> float:
    expected = [np.asarray(t) for t in (theirs if isinstance(theirs, (list, tuple)) else [theirs])]
    return max(
        float(np.max(np.abs(o - e.reshape(o.shape))) / (np.max(np.abs(e)) + 1e-30))
        for o, e in zip(ours, expected)
    )


def latencies(run: Callable[[], object], repeat: int) -> list[float]:
    """Seconds of each of `repeat` calls, after two warm-up calls."""
    run()
    run()
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        out.append(time.perf_counter() - start)
    return out


def _load_or_report(
    path: str, dims: Sequence[tuple[str, DimSpec]], console: Console
) -> Module | ShapeFamily | None:
    """The model or its shape family (reported and None if it cannot be read, or if its inputs'
    values set shapes: the command line has no way to give those values)."""
    try:
        loaded = frontend.load(path, dims=dict(dims))
        return (
            frontend.require_static(loaded, "the command line") if isinstance(loaded, ValueFamily) else loaded
        )
    except (GraphError, ValueError, OSError, ImportError) as e:
        console.print(f"[red]cannot import[/red] {escape(path)}: {escape(str(e))}", soft_wrap=True)
        return None


def _static_or_report(args: argparse.Namespace, user: str, console: Console) -> Module | None:
    """The model, which must have static shapes (every open dimension given a size with --dim)."""
    loaded = _load_or_report(args.model, args.dim, console)
    try:
        return None if loaded is None else frontend.require_static(loaded, user)
    except frontend.FrontendError as e:
        console.print(f"[red]cannot take[/red] {escape(args.model)}: {escape(str(e))} (--dim NAME=SIZE)")
        return None


def _inputs(module: Module, given: Sequence[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
    if given and len(given) != len(module.inputs):
        raise SystemExit(f"the model takes {len(module.inputs)} inputs, {len(given)} --input given")
    if given:
        return list(given)
    out = []
    for node in module.inputs:
        t = node.type
        if t.dtype.startswith("int"):
            out.append(rng.integers(0, 2, t.shape).astype(t.dtype))
        else:
            out.append(rng.standard_normal(t.shape).astype(t.dtype))
    return out


def _reference_runner(path: str, inputs: list[np.ndarray]) -> tuple[str, Callable[[], object]]:
    """ONNX Runtime for an ONNX file (all graph optimizations, as many threads as ours), the exported
    program itself for a .pt2 file."""
    if Path(path).suffix == ".pt2":
        import torch

        from compiler.frontend.pt2 import load_exported_program

        program = load_exported_program(path).module()
        args = [torch.from_numpy(a) for a in inputs]

        def run_torch() -> object:
            with torch.no_grad():
                out = program(*args)
            return [t.numpy() for t in out] if isinstance(out, (list, tuple)) else out.numpy()

        return "PyTorch eager (exported program)", run_torch
    return "ONNX Runtime", onnx_runtime(path, inputs, host_hardware().target.cores)


def onnx_runtime(model: str | bytes, inputs: Sequence[np.ndarray], threads: int) -> Callable[[], list]:
    """A forward pass of `model` in ONNX Runtime on `inputs`, as a peer is measured: CPU, all graph
    optimizations, `threads` threads."""
    session = onnx_runtime_session(model, threads)
    feed = {i.name: a for i, a in zip(session.get_inputs(), inputs)}
    return lambda: session.run(None, feed)


def onnx_runtime_session(model: str | bytes, threads: int, profile_prefix: str | None = None) -> Any:
    """ONNX Runtime as the peer is configured: CPU, all graph optimizations, `threads` threads;
    with `profile_prefix`, its profiler on (per-node times, written where the prefix says)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _tune_model(args: argparse.Namespace, console: Console) -> int:
    loaded = _load_or_report(args.model, args.dim, console)
    hardware = hardware_or_report(args.target, console)
    if loaded is None or hardware is None:
        return 2
    if isinstance(loaded, ShapeFamily):
        try:
            return _tune_family(args, loaded, hardware, console)
        except GraphError as e:  # a size of the family it cannot import at
            console.print(f"[red]cannot tune[/red] {escape(args.model)}: {escape(str(e))}", soft_wrap=True)
            return 2
    module = graph.optimize(loaded)
    inputs = _inputs(module, [], np.random.default_rng(args.seed))
    untuned = _median(graph.build(module, target=hardware.target), inputs, args.repeat)
    console.print(
        f"{len(graph.extract_tasks(module))} tasks; untuned: {untuned * 1e3:.3f} ms per forward pass"
    )
    result = _tuned(args, module, graph.extract_tasks(module), hardware, console)
    rows = [
        ("tensor-tuner, untuned", untuned),
        ("tensor-tuner, tuned", _median(result.model, inputs, args.repeat)),
    ]
    reference, run = _reference_runner(args.model, inputs)
    time.sleep(0.3)  # the other runtime's idle threads spin for a while after its last call
    rows.append((reference, statistics.median(latencies(run, args.repeat))))
    unmeasured = sum(t.best_secs is None for t in result.tasks)
    estimate = _estimate(result.estimated_secs, unmeasured)
    Console().print(_latency_table(Path(args.model).name, rows, estimate, args.repeat))
    console.print(f"tuned {result.scheduled.wall_secs if result.scheduled else 0.0:.0f} s", highlight=False)
    if args.plot:
        _plot_model(result, rows, args.plot)
    return 0


def _tuned(
    args: argparse.Namespace,
    model: Module | ShapeFamily,
    tasks: Sequence[ExtractedTask],
    hardware: Hardware,
    console: Console,
    sizes: list[dict[str, int]] | None = None,
) -> ModelTuneResult:
    """The model tuned as the command line says, progress after each batch, then the task table."""
    from tuner.model_tuning import tune_model

    result = tune_model(
        model,
        trials=args.trials,
        database=args.database or DEFAULT_DATABASE,
        scheduler=args.scheduler,
        seed=args.seed,
        batch_size=args.batch_size,
        progress=_progress(tasks, console),
        hardware=hardware,
        sizes=sizes,
    )
    Console().print(_tuned_table(result, hardware.target))
    return result


def _progress(tasks: Sequence[ExtractedTask], console: Console) -> Callable[[BatchProgress], None]:
    def report(p: BatchProgress) -> None:
        task, best = tasks[p.task], p.best_secs[p.task]
        console.print(
            f"[{p.trials:>5}/{p.total}] {task.name} (x{task.weight}): best {best * 1e3:.3f} ms, "
            f"{task.flops / best / 1e9:.3g} GFLOPS; model estimate "
            f"{_estimate(p.latency_secs, sum(b == float('inf') for b in p.best_secs))}",
            soft_wrap=True,
            highlight=False,
        )

    return report


def _tune_family(args: argparse.Namespace, family: ShapeFamily, hardware: Hardware, console: Console) -> int:
    """Tune a model over its ranges: at sizes spread over them under the one budget, then each tuned
    size and one between them run untuned, tuned and in the reference runtime."""
    from tuner.model_tuning import TUNED_SIZES, tasks_of

    if args.plot:
        console.print("--plot draws a model of static shapes: give each dimension a size to plot it")
    sizes = family.spread(TUNED_SIZES)
    tasks = tasks_of(family, sizes)
    console.print(f"inputs {family}; {len(tasks)} tasks at sizes {sizes}", soft_wrap=True)
    result = _tuned(args, family, tasks, hardware, console, sizes)
    table = Table(title=f"{Path(args.model).name}: median latency of one forward pass ({args.repeat} runs)")
    for column in ("sizes", "untuned ms", "tuned ms", "reference ms", "reference / tuned"):
        table.add_column(column, justify="left" if column == "sizes" else "right")
    between = {d.name: (d.min + d.max) // 2 + 1 for d in family.dims}  # untuned: default schedules
    for size in [*sizes, *([between] if between not in sizes else [])]:
        module = graph.optimize(family.specialize(size))
        inputs = _inputs(module, [], np.random.default_rng(args.seed))
        untuned = _median(graph.build(module, target=hardware.target), inputs, args.repeat)
        tuned = _median(result.model, inputs, args.repeat)
        _, run = _reference_runner(args.model, inputs)
        time.sleep(0.3)  # the other runtime's idle threads spin for a while after its last call
        reference = statistics.median(latencies(run, args.repeat))
        ms = [f"{secs * 1e3:.3f}" for secs in (untuned, tuned, reference)]
        table.add_row(", ".join(f"{k}={v}" for k, v in size.items()), *ms, f"{reference / tuned:.2f}x")
    Console().print(table)
    console.print(f"tuned {result.scheduled.wall_secs if result.scheduled else 0.0:.0f} s", highlight=False)
    return 0


def _tuned_table(result: ModelTuneResult, peak: Target) -> Table:
    total = result.estimated_secs
    table = Table(title=f"{len(result.tasks)} tasks on {peak.mcpu} ({peak.cores} cores)")
    for column in ("task", "calls", "trials", "best ms", "GFLOPS", "share"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for t in sorted(result.tasks, key=lambda t: -t.weighted_secs):
        ms = f"{t.best_secs * 1e3:.4f}" if t.best_secs else "-"
        table.add_row(
            t.task.name,
            str(t.task.weight),
            str(t.trials),
            ms,
            f"{t.best_gflops:.3g}",
            f"{t.weighted_secs / total:.1%}" if total < float("inf") else "-",
        )
    return table


def _estimate(secs: float, unmeasured: int) -> str:
    """The model's estimated latency, or why there is none (a task without a record: the budget was
    smaller than the number of tasks)."""
    return (
        f"unknown until every task has a record ({unmeasured} without)"
        if unmeasured
        else f"{secs * 1e3:.3f} ms"
    )


def _latency_table(name: str, rows: list[tuple[str, float]], estimate: str, repeat: int) -> Table:
    table = Table(
        title=f"{name}: median latency of one forward pass ({repeat} runs)",
        caption=f"estimated from the tasks' best records x calls: {estimate}",
    )
    ours = rows[1][1]
    for column in ("runtime", "median ms", "vs tuned"):
        table.add_column(column, justify="left" if column == "runtime" else "right")
    for runtime, secs in rows:
        table.add_row(runtime, f"{secs * 1e3:.3f}", f"{secs / ours:.2f}x")
    return table


def _plot_model(result: ModelTuneResult, rows: list[tuple[str, float]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    finite = [(n, secs * 1e3) for n, secs in result.curve if secs < float("inf")]
    if finite:
        ax.plot(*zip(*finite), "-o", markersize=3, label="estimated (best records x calls)")
    trials = result.curve[-1][0] if result.curve else 0
    ax.plot([0, trials], [rows[0][1] * 1e3, rows[1][1] * 1e3], "o", label="measured (untuned, tuned)")
    for runtime, secs in rows[2:]:
        ax.axhline(secs * 1e3, linestyle="--", color="gray", label=runtime)
    ax.set_xlabel("trials")
    ax.set_ylabel("latency (ms)")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _export(args: argparse.Namespace, console: Console) -> int:
    loaded = _load_or_report(args.model, args.dim, console)
    hardware = hardware_or_report(args.target, console)
    if loaded is None or hardware is None:
        return 2
    database = args.database or DEFAULT_DATABASE
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = build_model(
            loaded if isinstance(loaded, ShapeFamily) else graph.optimize(loaded),
            database=database,
            hardware=hardware,
        )
    if not isinstance(model, CompiledModel):
        why = "; ".join(str(w.message) for w in caught)
        console.print(
            f"[red]cannot export[/red] {escape(args.model)} as one library for its ranges ({escape(why)}):"
            " give each open dimension a size (--dim NAME=SIZE)",
            soft_wrap=True,
        )
        return 2
    tuned = sum(s.origin == "given" for s in model.sources)
    library, header = model.export(args.output)
    console.print(
        f"wrote {library} and {header}: {len(model.sources)} kernels ({tuned} tuned), "
        f"{library.stat().st_size / 1e6:.1f} MB",
        highlight=False,
    )
    return 0


def _median(model: Callable[..., object], inputs: Sequence[np.ndarray], repeat: int) -> float:
    return statistics.median(latencies(lambda: model(*inputs), repeat))
