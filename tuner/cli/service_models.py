"""The service's model commands of `tuner`: submit an ONNX model to a coordinator to tune under one
budget (following its progress with `--wait`), and download its compiled artifact.

    tuner submit-model model.onnx --coordinator URL --token-file T --trials 2000 [--wait]
    tuner submit-model graph.json ...       (the graph's JSON form, compiler/graph/serialize.py)
    tuner model-artifact MODEL_ID -o model.so [--hardware KEY]   (model.h beside it; or -o x.tar.gz)
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from compiler.graph import rename_header
from tuner.cli import service as commands
from tuner.cli.models import add_dim_option
from tuner.service.artifact import HEADER, LIBRARY
from tuner.service.client import ApiError, Client
from tuner.service.schemas import ModelDetail, ModelPublic
from tuner.task_scheduler import SCHEDULERS

POLL_SECONDS = 2.0


def add_model_service_commands(command: commands.CommandFactory) -> None:
    p = command("submit-model", "submit an ONNX model to a coordinator to tune every layer", workload=False)
    p.add_argument("model", help="an .onnx file, or a .json file of the graph's JSON form")
    commands.add_remote_options(p)
    p.add_argument("--trials", type=int, default=2000, help="measurements shared by all its layers")
    p.add_argument("--scheduler", choices=SCHEDULERS, default="gradient")
    p.add_argument("--name", help="what to call it (default: the file's name)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hardware", help="hardware key to tune for (default: the only one registered)")
    p.add_argument(
        "--wait", action="store_true", help="follow the model until it ends, then print its layers"
    )
    add_dim_option(p)
    p.set_defaults(run=_submit_model)
    p = command(
        "model-artifact", "download a coordinator's model compiled from its best records", workload=False
    )
    p.add_argument("model_id", type=int)
    p.add_argument(
        "-o",
        "--output",
        required=True,
        help="a .so to write (its header beside it, as tuner export does), or else the .tar.gz as served",
    )
    commands.add_remote_options(p)
    p.add_argument("--hardware", help="hardware key (default: the one the model was tuned for)")
    p.add_argument(
        "--size",
        action="append",
        default=[],
        type=_size,
        metavar="NAME=SIZE",
        help="for a model tuned for ranges: a library of static shapes at this size of each ranged "
        "dimension (by default, one library for every size in the ranges)",
    )
    p.set_defaults(run=_artifact)


def _size(text: str) -> tuple[str, int]:
    name, _, value = text.partition("=")
    if not name or not value.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: NAME=SIZE, a dimension's name and a whole number")
    return name, int(value)


def _submit_model(args: argparse.Namespace, console: Console) -> int:
    if not commands.is_remote(args):
        console.print("submit-model needs a coordinator (--coordinator URL); embedded: tuner tune-model")
        return 2
    path = Path(args.model)
    try:
        source = path.read_bytes()
        graph = json.loads(source) if path.suffix == ".json" else None
    except (OSError, ValueError) as e:
        console.print(f"[red]cannot read[/red] {escape(str(e))}")
        return 2
    with commands.client(args) as api:
        try:
            model = api.submit_model(
                None if graph is not None else source,
                graph=graph,
                trials=args.trials,
                name=args.name or path.stem,
                hardware=args.hardware,
                scheduler=args.scheduler,
                seed=args.seed,
                dims={name: list(spec) if isinstance(spec, tuple) else spec for name, spec in args.dim}
                or None,
            )
        except ApiError as e:
            console.print(f"[red]refused[/red]: {escape(e.summary)}")
            return 2
        console.print(f"model {model.id} ({escape(model.name)}): {model.tasks} layers, {model.trials} trials")
        if not args.wait:
            _print(model, args.json)
            return 0
        detail = follow(api, model, console)
    _print(detail, args.json)
    return 0 if detail.status.value == "done" else 1


def follow(api: Client, model: ModelPublic, console: Console) -> ModelDetail:
    """Poll the model until it ends, printing a line per finished batch: trials measured and the
    estimated latency."""
    seen = 0
    while True:
        try:
            detail = api.model(model.id)
        except httpx.TransportError:  # the coordinator restarting, say: the model goes on
            time.sleep(POLL_SECONDS)
            continue
        for point in detail.curve[seen:]:
            latency = (
                f"{point.estimated_secs * 1e3:.4f} ms"
                if point.estimated_secs
                else "- (a layer has no record yet)"
            )
            console.print(f"[{point.trials:>5}/{detail.trials}] estimated latency {latency}", highlight=False)
        seen = len(detail.curve)
        if detail.status.value not in ("pending", "running"):
            return detail
        time.sleep(POLL_SECONDS)


def _print(model: ModelPublic, as_json: bool) -> None:
    if as_json:
        print(json.dumps(model.model_dump(mode="json"), indent=2))
        return
    if isinstance(model, ModelDetail):
        Console(file=sys.stdout).print(layer_table(model))
    print(f"model {model.id}: {model.status.value}{f' ({model.message})' if model.message else ''}")


def layer_table(model: ModelDetail) -> Table:
    estimated = f"{model.estimated_secs * 1e3:.4f} ms" if model.estimated_secs else "-"
    table = Table(
        title=f"model {model.id} ({model.name}) on {model.hardware_key}",
        caption=f"estimated latency {estimated}",
    )
    for column in ("task", "layer", "calls", "trials", "best ms", "GFLOPS", "share"):
        table.add_column(column, justify="left" if column == "layer" else "right")
    for layer in model.layers:
        table.add_row(
            str(layer.task_id),
            escape(layer.workload_name),
            str(layer.weight),
            f"{layer.trials_done}/{layer.trials}",
            f"{layer.best_secs * 1e3:.4f}" if layer.best_secs else "-",
            f"{layer.gflops:.3g}" if layer.gflops else "-",
            f"{layer.share:.1%}" if layer.share is not None else "-",
        )
    return table


def _artifact(args: argparse.Namespace, console: Console) -> int:
    if not commands.is_remote(args):
        console.print("model-artifact needs a coordinator (--coordinator URL); embedded: tuner export")
        return 2
    with commands.client(args) as api:
        data = api.model_artifact(args.model_id, hardware=args.hardware, sizes=dict(args.size) or None)
    output = Path(args.output)
    if output.suffix != ".so":
        output.write_bytes(data)
        console.print(
            f"wrote {escape(str(output))} ({len(data) / 1e6:.2f} MB): model.so and model.h", highlight=False
        )
        return 0
    header = output.with_suffix(".h")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        library, served_header = (tar.extractfile(member) for member in (LIBRARY, HEADER))
        assert library is not None and served_header is not None
        output.write_bytes(library.read())
        header.write_text(rename_header(served_header.read().decode(), LIBRARY, output.name))
    console.print(f"wrote {escape(str(output))} and {escape(str(header))}", highlight=False)
    return 0
