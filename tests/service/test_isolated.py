"""`run_isolated`: a function in a child process with a memory limit and a deadline; what goes wrong
there (an exception, a hang, a death) comes back as an error, and the caller's process is untouched."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from tuner.service.isolated import IsolatedError, run_isolated


def add(a: int, b: int) -> int:
    return a + b


def refuse(message: str) -> None:
    raise ValueError(message)


def hang() -> None:
    time.sleep(60)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def allocate(n: int) -> int:
    return int(np.ones(n, np.uint8).sum())


def test_a_result_and_an_exception_come_back():
    assert run_isolated(add, 2, 3, seconds=60, memory_bytes=1 << 30) == 5
    with pytest.raises(ValueError, match="a bad model"):
        run_isolated(refuse, "a bad model", seconds=60, memory_bytes=1 << 30)


def test_a_child_that_overruns_or_dies_is_an_error():
    start = time.monotonic()
    with pytest.raises(IsolatedError, match="took longer than 3 s"):
        run_isolated(hang, seconds=3, memory_bytes=1 << 30)
    assert time.monotonic() - start < 30
    with pytest.raises(IsolatedError, match="killed by signal 9"):
        run_isolated(die, seconds=60, memory_bytes=1 << 30)


def test_memory_past_the_limit_is_refused_in_the_child():
    with pytest.raises(IsolatedError, match="needs more than its 1024 MiB"):
        run_isolated(allocate, 2 << 30, seconds=60, memory_bytes=1 << 30)
    assert run_isolated(allocate, 100 << 20, seconds=60, memory_bytes=1 << 30) == 100 << 20


def where_am_i() -> tuple[str, list[str]]:
    return os.getcwd(), os.listdir()


def test_the_child_works_in_an_empty_directory_of_its_own(tmp_path, monkeypatch):
    """A relative name in a submitted model finds nothing of the coordinator's directory (its tokens,
    its SQLite file), and the directory is gone after the child."""
    (tmp_path / "admin.token").write_text("secret")
    monkeypatch.chdir(tmp_path)
    workdir, listing = run_isolated(where_am_i, seconds=60, memory_bytes=1 << 30)
    assert workdir != str(tmp_path) and listing == []
    assert not os.path.exists(workdir)
