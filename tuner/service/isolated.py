"""Run a function in a child process with a memory limit and a deadline: what the coordinator does with
a submitted model (importing one computes its constant shapes with numpy, and a hostile file can ask
for a terabyte) and with the build of a model's artifact (seconds to minutes of CPU). A child that runs
out of memory, crashes or overruns costs only itself; the API process and its memory are untouched.

Children fork from a server process (multiprocessing's forkserver) that imported the model code once:
a spawned child imported numpy, onnx and the compiler anew for every submitted model, seconds of a
`submit-model`. The server is started from a fresh interpreter, not forked from the coordinator, so
it holds none of the coordinator's threads, sockets or database connections.

Each child works in an empty directory of its own, removed after it: a file name in the bytes it reads
(or a library that resolves one against the working directory) finds nothing of the coordinator's,
whose directory holds its tokens and its SQLite file."""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import signal
import tempfile
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

T = TypeVar("T")

_CTX = mp.get_context("forkserver")
CHILD_NICENESS = 10
_CTX.set_forkserver_preload(["tuner.service.model_import", "tuner.service.artifact"])


class IsolatedError(Exception):
    """The function raised (its exception is re-raised as is), or the child failed: `str` says how."""


def run_isolated(fn: Callable[..., T], *args: Any, seconds: float, memory_bytes: int) -> T:
    """`fn(*args)` in a child limited to `memory_bytes` of address space. An exception that
    `fn` raises is re-raised here (it must pickle); a child that dies, or is still running after
    `seconds`, is an IsolatedError. The child's working directory is empty: paths `fn` is given
    must be absolute."""
    with tempfile.TemporaryDirectory(prefix="tensor-tuner-isolated-") as workdir:
        return _run(fn, args, workdir, seconds, memory_bytes)


def _run(fn: Callable[..., T], args: tuple[Any, ...], workdir: str, seconds: float, memory_bytes: int) -> T:
    receive, send = _CTX.Pipe(duplex=False)
    child = _CTX.Process(target=_child, args=(send, fn, args, workdir, memory_bytes), daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(seconds):
            raise IsolatedError(f"it took longer than {seconds:g} s")
        try:
            ok, value = receive.recv()
        except EOFError:
            raise IsolatedError(_death(child, memory_bytes)) from None
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join()
    if not ok:
        raise value
    return value


def _child(
    send: Connection, fn: Callable[..., Any], args: tuple[Any, ...], workdir: str, memory_bytes: int
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator decides when it stops
    os.chdir(workdir)
    # Below the API process: an import or a build is minutes of CPU on a host of two cores, and must
    # not slow the requests the workers wait on (heartbeats took 2.4 s during two 60 MiB imports).
    os.nice(CHILD_NICENESS)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    try:
        result = (True, fn(*args))
    except MemoryError:
        result = (False, IsolatedError(f"it needs more than its {memory_bytes >> 20} MiB of memory"))
    except Exception as e:
        result = (False, e)
    try:
        send.send(result)
    except Exception as e:  # an exception that does not pickle: its text does
        send.send((False, IsolatedError(f"{type(result[1]).__name__}: {result[1]} ({e})")))
    send.close()


def _death(child: Any, memory_bytes: int) -> str:
    """How a child that sent nothing died: killed by a signal (native code that could not allocate
    within the limit aborts or crashes), or exited."""
    child.join(1.0)
    code = child.exitcode
    if code is not None and code < 0:
        return (
            f"its process was killed by signal {-code}, most likely out of its {memory_bytes >> 20} MiB "
            "of memory"
        )
    return f"its process exited with status {code} without an answer"
