"""The service's commands of `tuner`: serve, worker, token, hardware, submit, status, cancel, the
remote side of best and show, and (`service_models`) submit-model and model-artifact.

Every command reads `tuner.service.settings.Settings` (environment variables `TENSOR_TUNER_*`), and its flags
override single settings. Without a coordinator (no `--coordinator` flag, no
TENSOR_TUNER_COORDINATOR_URL), submit, status, best and show work embedded on the database file:
`submit` then tunes right here, as `tune` does.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from runner.coordinator_client import coordinator_urls
from runner.results import TimingConfig
from runner.worker import Worker, WorkerConfig, parse_cpus
from tuner.database import Database, Role, TaskStatus
from tuner.database.tokens import LastAdmin, create_token, revoke_token, tokens
from tuner.range_spec import RangedWorkload
from tuner.service.client import ApiError, BadResponse, Client
from tuner.service.clock import now as clock_now
from tuner.service.schemas import Best, RecordPublic, TaskPublic
from tuner.service.settings import Settings

Handler = Callable[[argparse.Namespace, Console], int]
CommandFactory = Callable[..., argparse.ArgumentParser]
# Flags that override a setting of the same meaning.
_OVERRIDES = {
    "database": "database_url",
    "host": "host",
    "port": "port",
    "coordinator": "coordinator_url",
    "token": "token",
    "token_file": "token_file",
    "name": "worker_name",
    "batch": "worker_batch",
    "cpus": "worker_cpus",
    "runner": "worker_runner",
    "repeat": "worker_repeat",
    "min_repeat_ms": "worker_min_repeat_ms",
}
FINISHED = (TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.CANCELLED)


def settings_from(args: argparse.Namespace) -> Settings:
    overrides = {
        field: getattr(args, flag) for flag, field in _OVERRIDES.items() if getattr(args, flag, None)
    }
    if isinstance(overrides.get("coordinator_url"), list):  # --coordinator given once or more
        overrides["coordinator_url"] = ",".join(overrides["coordinator_url"])
    # A token flag wins over the other way of giving one in the environment (both flags: an error).
    for given, other in (("token", "token_file"), ("token_file", "token")):
        if given in overrides and other not in overrides:
            overrides[other] = None
    try:
        return Settings(**overrides)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise SystemExit(f"bad settings: {problems}") from None


def database_url(args: argparse.Namespace) -> str:
    return settings_from(args).database_url


def is_remote(args: argparse.Namespace) -> bool:
    return "coordinator_url" in settings_from(args).model_fields_set


def add_remote_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--coordinator",
        action="append",
        help="coordinator URL (or TENSOR_TUNER_COORDINATOR_URL); default: embedded. A worker takes "
        "several (repeated, or separated by commas) and fails over between them; other commands use "
        "the first",
    )
    p.add_argument(
        "--token-file",
        help="file holding the API token (or TENSOR_TUNER_TOKEN_FILE, or the token itself in "
        "TENSOR_TUNER_TOKEN)",
    )
    p.add_argument(
        "--token", help="the API token: every user of this machine can read it here; prefer --token-file"
    )


def add_hardware_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--hardware",
        help="hardware key (default: this machine's; with a coordinator, the only kind registered)",
    )


def client(args: argparse.Namespace) -> Client:
    settings = settings_from(args)
    return Client(coordinator_urls(settings.coordinator_url)[0], bearer_token(settings))


def bearer_token(settings: Settings) -> str | None:
    try:
        return settings.bearer_token()
    except OSError as e:
        raise SystemExit(f"cannot read the token file: {e}") from None


def run_reporting_coordinator_errors(args: argparse.Namespace, console: Console) -> int:
    """Run the command; a coordinator that refuses a request, or cannot be reached, is one line and
    exit status 1, not a traceback."""
    try:
        return args.run(args, console)
    except ApiError as e:
        console.print(f"[red]the coordinator refused[/red]: {escape(e.summary)}")
    except BadResponse as e:
        console.print(f"[red]an answer this client cannot read[/red]: {escape(str(e))}")
    except httpx.HTTPError as e:
        console.print(f"[red]no answer from the coordinator[/red] ({type(e).__name__}): {escape(str(e))}")
    return 1


def remote_best(args: argparse.Namespace, spec: dict[str, Any], k: int) -> list[RecordPublic]:
    """The coordinator's k fastest records of a workload, for `best` and `show`."""
    with client(args) as api:
        return api.best(spec, hardware=args.hardware, k=k, timing=args.timing)


def add_service_commands(command: CommandFactory, *, embedded_tune: Handler) -> None:
    p = command("serve", "run the coordinator: REST API, dashboard and search loops", workload=False)
    p.add_argument("--host", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000)")
    p.add_argument("--no-search-loop", action="store_true", help="serve the API only")
    p.add_argument("--workers", type=int, default=1, help="API processes (uvicorn workers; default 1)")
    p.add_argument("--log-level", default="info")
    p.set_defaults(run=_serve)

    p = command("worker", "run a worker daemon: lease candidates, measure them here, report", workload=False)
    add_remote_options(p)
    p.add_argument("--name", help="name in the fleet (default host:pid)")
    p.add_argument("--batch", type=int, help="candidates per lease (default 4)")
    p.add_argument("--cpus", help="pin to these CPUs, e.g. 0-3 or 0,2")
    p.add_argument("--runner", choices=("local", "null"), help="'null' measures nothing (benchmarks)")
    p.add_argument("--repeat", type=int, help="timed repeats per candidate (default 5)")
    p.add_argument("--min-repeat-ms", type=float, help="minimum duration of one repeat (default 5)")
    p.set_defaults(run=_worker)

    p = command("token", "create, list or revoke API tokens (directly in the database)", workload=False)
    p.add_argument("action", choices=("create", "list", "revoke"))
    p.add_argument("token_id", nargs="?", type=int, help="the token to revoke")
    p.add_argument("--role", choices=[r.value for r in Role], default=Role.CLIENT.value)
    p.add_argument("--name", default="", help="who or what holds it")
    p.set_defaults(run=_token)

    p = command("hardware", "list the kinds of hardware, or approve some (in the database)", workload=False)
    p.add_argument("action", choices=("list", "approve"))
    p.add_argument("hardware_id", nargs="*", type=int, help="the kinds to approve (tuner hardware list)")
    p.add_argument("--peak-gflops", type=float, help="the machine's peak: faster results are refused")
    p.set_defaults(run=_hardware)

    p = command("submit", "submit a tuning task to a coordinator (embedded: tune it here)")
    add_remote_options(p)
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--strategy", choices=("evolutionary", "random"), default="evolutionary")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hardware", help="hardware key to tune for (default: the only one registered)")
    p.add_argument("--wait", action="store_true", help="follow the task until it ends")
    p.add_argument(
        "--sizes", help="with a range (M=1..512, or a symbolic script): the sizes to tune, e.g. 1,64,512"
    )
    p.set_defaults(
        run=_submit(embedded_tune),
        plot=None,
        no_baseline=True,
        batch_size=None,
        target=None,
        takes_range=True,
    )

    p = command("status", "tuning tasks and their progress", workload=False)
    add_remote_options(p)
    p.add_argument("task_id", nargs="?", type=int, help="one task in detail")
    p.set_defaults(run=_status)

    p = command("cancel", "cancel a coordinator's task", workload=False)
    add_remote_options(p)
    p.add_argument("task_id", type=int)
    p.set_defaults(run=_cancel)


def _serve(args: argparse.Namespace, console: Console) -> int:
    """The API (uvicorn, in `--workers` processes) and one search loop process beside it."""
    import uvicorn

    from tuner.service.app import create_app
    from tuner.service.server import uvicorn_options
    from tuner.service.task_loop import TaskLoopProcess

    # uvicorn re-raises the SIGTERM it shut down on, which would kill the process after a clean stop;
    # exit 0 instead, so systemd and docker report success and keep death by signal for real trouble.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    settings = settings_from(args)
    loop = None if args.no_search_loop else TaskLoopProcess(settings)
    if loop:
        loop.start()
    os.environ.update(settings.environment())  # the API processes and the protocol read it
    serve = {"host": settings.host, "port": settings.port, "log_level": args.log_level}
    serve |= uvicorn_options(settings)
    try:
        if args.workers > 1:  # each API process builds its app from the environment
            uvicorn.run("tuner.service.app:create_api", factory=True, workers=args.workers, **serve)
        else:
            uvicorn.run(create_app(settings), **serve)
    finally:
        if loop:
            loop.stop()
    return 0


def _worker(args: argparse.Namespace, console: Console) -> int:
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request drowns what matters
    s = settings_from(args)
    token = bearer_token(s)
    if not token:
        console.print(
            "[red]a worker needs a token[/red]: --token-file, TENSOR_TUNER_TOKEN_FILE or TENSOR_TUNER_TOKEN "
            "(from: tuner token create --role worker)"
        )
        return 2
    try:
        coordinator_urls(s.coordinator_url)
    except ValueError as e:
        console.print(f"[red]bad coordinator URL[/red]: {escape(str(e))}")
        return 2
    config = WorkerConfig(
        coordinator_url=s.coordinator_url,
        token=token,
        batch=s.worker_batch,
        runner=s.worker_runner,
        timing=TimingConfig(repeat=s.worker_repeat, min_repeat_ms=s.worker_min_repeat_ms),
        cpus=parse_cpus(s.worker_cpus) if s.worker_cpus else None,
        max_backoff_s=s.worker_max_backoff_seconds,
    )
    if s.worker_name:  # else the config's default, host:pid
        config = replace(config, name=s.worker_name)
    worker = Worker(config)
    worker.install_signal_handlers()
    return worker.run()


def _token(args: argparse.Namespace, console: Console) -> int:
    with Database.open(database_url(args)) as db:
        if args.action == "create":
            token_id, secret = create_token(db, role=args.role, name=args.name)
            console.print(f"token {token_id} ({args.role}); it is shown only now:")
            print(secret)
            return 0
        if args.action == "revoke":
            if args.token_id is None:
                console.print("give the id of the token to revoke (tuner token list)")
                return 2
            try:
                revoke_token(db, token_id=args.token_id, now=clock_now(db))
            except KeyError:
                console.print(f"no token {args.token_id}")
                return 1
            except LastAdmin as e:
                console.print(str(e))
                return 1
            return 0
        rows = tokens(db)
    table = Table(title="API tokens")
    for column in ("id", "role", "name", "created", "revoked"):
        table.add_column(column)
    for t in rows:
        table.add_row(
            str(t.id), t.role.value, t.name, f"{t.created_at:%Y-%m-%d %H:%M}", f"{t.revoked_at or ''}"
        )
    Console().print(table)
    return 0


def _hardware(args: argparse.Namespace, console: Console) -> int:
    """An admin's view of the kinds of machine: a kind a worker token registered is no task's target
    until it is approved here (or by an admin token over the API)."""
    if args.peak_gflops is not None and not args.peak_gflops > 0:
        console.print("--peak-gflops must be a positive number")
        return 2
    with Database.open(database_url(args)) as db:
        if args.action == "approve":
            if not args.hardware_id:
                console.print("give the ids of the hardware to approve (tuner hardware list)")
                return 2
            for hardware_id in args.hardware_id:
                try:
                    kind = db.approve_hardware(hardware_id, peak_gflops=args.peak_gflops)
                except KeyError:
                    console.print(f"no hardware {hardware_id}")
                    return 1
                console.print(f"hardware {kind.id} ({escape(kind.key)}) is approved")
            return 0
        rows = db.hardware_list()
    table = Table(title="hardware")
    for column in ("id", "key", "cpu model", "cores", "approved", "peak GFLOPS"):
        table.add_column(column, **_whole(column == "key", [h.key for h in rows]))
    for h in rows:
        approved = f"{h.approved_at:%Y-%m-%d %H:%M}" if h.approved_at else "[yellow]waiting[/yellow]"
        peak = f"{h.peak_gflops:g}" if h.peak_gflops else "-"
        table.add_row(str(h.id), escape(h.key), escape(h.cpu_model), str(h.cores), approved, peak)
    Console(file=sys.stdout).print(table)
    return 0


def _submit(embedded_tune: Handler) -> Handler:
    def submit(args: argparse.Namespace, console: Console) -> int:
        if not is_remote(args):
            return embedded_tune(args, console)
        if isinstance(args.workload, RangedWorkload):
            return _submit_range(args, console)
        with client(args) as api:
            try:
                task = api.submit(
                    args.workload.spec,
                    trials=args.trials,
                    strategy=args.strategy,
                    seed=args.seed,
                    hardware=args.hardware,
                )
            except ApiError as e:
                console.print(f"[red]refused[/red]: {escape(e.summary)}")
                return 2
            if args.wait:
                task = _follow(api, task, console, quiet=args.json)
        print(
            json.dumps(task.model_dump(mode="json"), indent=2)
            if args.json
            else f"task {task.id}: {task.status}"
        )
        return 0 if task.status != TaskStatus.FAILED else 1

    return submit


def _submit_range(args: argparse.Namespace, console: Console) -> int:
    """A range goes to the coordinator as a model of its sizes: one budget over them."""
    ranged: RangedWorkload = args.workload
    with client(args) as api:
        model = api.submit_model(
            workload=dict(ranged.spec),
            sizes=[size for size, _ in ranged.sizes],
            trials=args.trials,
            name=ranged.name,
            hardware=args.hardware,
            seed=args.seed,
        )
    sizes = ", ".join(str(size) for size, _ in ranged.sizes)
    console.print(
        f"model {model.id} ({escape(model.name)}): sizes {sizes} under {model.trials} trials; follow "
        f"it with `tuner status` or GET /v1/models/{model.id}"
    )
    if args.json:
        print(json.dumps(model.model_dump(mode="json"), indent=2))
    return 0


def _follow(api: Client, task: TaskPublic, console: Console, *, quiet: bool) -> TaskPublic:
    with Progress(
        TextColumn(f"task {task.id} {task.workload_name}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("best {task.fields[best]:.1f} GFLOPS"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
    ) as bar:
        progress = bar.add_task("task", total=task.trials, best=0.0)
        while task.status not in FINISHED:
            time.sleep(1.0)
            try:
                task = api.task(task.id)
            except httpx.TransportError:  # the coordinator restarting, say: the task goes on
                continue
            bar.update(progress, completed=task.trials_done, best=task.best.gflops if task.best else 0.0)
    return task


class EmbeddedTask(BaseModel):
    """A task of the database file as `status` lists it without a coordinator: the table's columns,
    with no best (ranking records is the coordinator's)."""

    id: int
    workload_name: str
    hardware_key: str
    status: TaskStatus
    trials_done: int
    trials: int
    best: Best | None = None


def _status(args: argparse.Namespace, console: Console) -> int:
    rows: Sequence[TaskPublic | EmbeddedTask]
    if is_remote(args):
        with client(args) as api:
            rows = [api.task(args.task_id)] if args.task_id else api.tasks()
    else:
        with Database.open(database_url(args)) as db:
            try:
                infos = [db.get_task(args.task_id)] if args.task_id else db.tasks()
            except KeyError:
                console.print(f"no task {args.task_id}")
                return 1
            rows = [EmbeddedTask.model_validate(t, from_attributes=True) for t in infos]
    if args.json:
        print(json.dumps([t.model_dump(mode="json") for t in rows], indent=2))
        return 0
    table = Table(title="tasks")
    for column in ("task", "workload", "hardware", "status", "trials", "best GFLOPS"):
        table.add_column(column, **_whole(column == "hardware", [t.hardware_key for t in rows]))
    for t in rows:
        best = f"{t.best.gflops:.1f}" if t.best else "-"
        table.add_row(
            str(t.id), t.workload_name, t.hardware_key, t.status.value, f"{t.trials_done}/{t.trials}", best
        )
    Console(file=sys.stdout).print(table)
    return 0


def _whole(identifier: bool, values: Sequence[str]) -> dict[str, Any]:
    """Column options that keep an identifier whole: a hardware key is copied into `--hardware`, so
    a narrow terminal squeezes the other columns rather than cut the key with an ellipsis."""
    if not identifier:
        return {}
    return {"no_wrap": True, "min_width": max((len(v) for v in values), default=0)}


def _cancel(args: argparse.Namespace, console: Console) -> int:
    if not is_remote(args):
        console.print("cancel needs a coordinator (--coordinator URL): embedded tasks end with their command")
        return 2
    with client(args) as api:
        task = api.cancel(args.task_id)
    print(f"task {task.id}: {task.status}")
    return 0
