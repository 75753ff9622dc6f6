"""How the runner starts its children: `spawn` (libgomp's thread pool does not survive fork), without
re-running the parent's main script in each child.

Python's `spawn` imports the parent's `__main__` in every child so that functions defined there
unpickle, which runs a script's top-level code again: a script that tunes without an
`if __name__ == "__main__":` guard (as the MLC course's do) would start tuning inside each child,
and multiprocessing stops it with a bootstrapping RuntimeError. The runner's children run only
runner code on candidates that are data (a spec and a trace), so they never need `__main__`: while a
child is being started, the parent's main module is replaced by an empty one, which makes spawn
leave it out of what the child prepares.
"""

from __future__ import annotations

import multiprocessing.context as mp_context
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Starts run on the caller's thread and on a pool's worker-handler thread: one at a time.
_LOCK = threading.Lock()


@contextmanager
def _main_left_out() -> Iterator[None]:
    with _LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if main is not None:
                sys.modules["__main__"] = main


class _Process(mp_context.SpawnProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        with _main_left_out():
            return mp_context.SpawnProcess._Popen(process_obj)


class _Context(mp_context.SpawnContext):
    Process = _Process


def runner_context() -> mp_context.SpawnContext:
    """A spawn context whose children do not import the parent's main module."""
    return _Context()
