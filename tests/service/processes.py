"""Real processes for the service tests: `tuner serve` and `tuner worker`, started as a user would, on
loopback, with the test's settings in their environment; always stopped, even when a test fails."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tuner.service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.1) -> object:
    """Poll until `condition()` is truthy; fail the test with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def environment(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENSOR_TUNER_")}
    return {**env, **settings.environment(), **extra}


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM it when the process that started it dies, so a test run
    killed outright (or a benchmark interrupted) leaves no coordinator or worker running."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Process:
    """A `tuner` subprocess (or `python -m module`) whose output goes to a log file (read it when a
    test fails)."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, module: str = "tuner.cli") -> None:
        self.log = log
        self._out = open(log, "ab")  # noqa: SIM115 (closed in stop)
        self.popen = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def send_signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        self.send_signal(sig)
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            code = self.popen.wait()
        self._out.close()
        return code

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class Coordinator:
    """`tuner serve` on a free port; restartable on the same port and database."""

    def __init__(self, settings: Settings, logs: Path, *flags: str) -> None:
        self.settings = settings
        self.flags = flags
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.logs = logs
        self.process: Process | None = None
        self.starts = 0

    def start(self) -> Coordinator:
        self.starts += 1
        env = environment(self.settings, TENSOR_TUNER_PORT=str(self.port))
        self.process = Process(
            ["serve", "--log-level", "warning"], env, self.logs / f"coordinator-{self.starts}.log"
        )
        wait_until(self.healthy, 60, f"the coordinator on {self.url}")
        return self

    def healthy(self) -> bool:
        assert self.process is not None
        if self.process.popen.poll() is not None:
            raise AssertionError(f"the coordinator exited:\n{self.process.output()[-3000:]}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.process is not None
        return self.process.stop(sig)


def start_worker(
    coordinator: Coordinator,
    token: str,
    name: str,
    logs: Path,
    *extra: str,
    env: dict[str, str] | None = None,
) -> Process:
    args = ["worker", "--coordinator", coordinator.url, "--token", token, "--name", name, *extra]
    return Process(args, env or environment(coordinator.settings), logs / f"{name}.log")
