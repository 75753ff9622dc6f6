"""What the deploy tests read and run: the files in deploy/, parsed the way Docker, compose and systemd
read them (as far as these files use), and the `tuner` processes they start, run here on loopback."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from tuner.service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SYSTEMD = DEPLOY / "systemd"
# Where the units expect the project's virtual environment (deploy/README.md installs it there).
INSTALLED_TUNER = "/opt/tensor-tuner/venv/bin/tuner"


def settings_from(env: dict[str, str]) -> Settings:
    """The settings that a process with environment `env` reads. A TENSOR_TUNER_ variable that names
    no setting fails here: pydantic-settings would ignore it without a word."""
    ours = {
        k.removeprefix("TENSOR_TUNER_").lower(): v for k, v in env.items() if k.startswith("TENSOR_TUNER_")
    }
    unknown = [f"TENSOR_TUNER_{name.upper()}" for name in ours if name not in Settings.model_fields]
    assert not unknown, f"not settings (see deploy/SETTINGS.md): {unknown}"
    return Settings(**ours)


# --- Dockerfile -------------------------------------------------------------------------------------


@dataclass
class Dockerfile:
    base: str = ""
    user: str = ""
    env: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)  # COPY sources, relative to the build context
    healthcheck: bool = False
    runs: list[str] = field(default_factory=list)  # RUN commands, continuation lines joined


def dockerfile(path: Path = DEPLOY / "Dockerfile") -> Dockerfile:
    image = Dockerfile()
    text = re.sub(
        r"\\\n", " ", "\n".join(line for line in path.read_text().splitlines() if not _comment(line))
    )
    for line in text.splitlines():
        if not line.strip():
            continue
        instruction, _, rest = line.strip().partition(" ")
        instruction, rest = instruction.upper(), rest.strip()
        if instruction == "FROM":
            image.base = rest.split()[0]
        elif instruction == "USER":
            image.user = rest
        elif instruction == "ENV":
            for word in shlex.split(rest):
                name, _, value = word.partition("=")
                image.env[name] = value
        elif instruction in ("ENTRYPOINT", "CMD"):
            setattr(image, instruction.lower(), json.loads(rest))  # exec form only: shell form breaks signals
        elif instruction == "COPY":
            sources = [w for w in rest.split() if not w.startswith("--")][:-1]
            image.copied.extend(sources)
        elif instruction == "HEALTHCHECK":
            image.healthcheck = True
        elif instruction == "RUN":
            image.runs.append(rest)
    return image


def _comment(line: str) -> bool:
    return line.lstrip().startswith("#")


# --- compose ----------------------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


_VARIABLE = re.compile(r"\$(?:(\$)|\{(\w+)(?:(:?[-?])([^}]*))?\}|(\w+))")


def interpolate(value: Any, variables: dict[str, str]) -> Any:
    """Compose's variable substitution: $$, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}."""
    if isinstance(value, dict):
        return {k: interpolate(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, variables) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(m: re.Match[str]) -> str:
        dollar, name, operator, argument, bare = m.groups()
        if dollar:
            return "$"
        name = name or bare
        present = name in variables and (variables[name] != "" or operator in ("-", "?"))
        if present:
            return variables[name]
        if operator and operator.endswith("?"):
            raise ValueError(f"compose would refuse to start: ${{{name}}} unset: {argument}")
        return argument if operator else ""

    return _VARIABLE.sub(substitute, value)


def environment_list(environment: dict[str, Any] | list[str] | None) -> dict[str, str]:
    if isinstance(environment, list):
        return dict(item.partition("=")[::2] for item in environment)
    return {k: "" if v is None else str(v) for k, v in (environment or {}).items()}


# --- systemd ----------------------------------------------------------------------------------------


def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A unit file's sections, each key with every value it was given (in order)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    text = re.sub(r"\\\n", " ", path.read_text())
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def expand_specifiers(text: str, instance: str = "", credentials: str = "") -> str:
    """The specifiers these units use; any other one fails the test rather than pass unexpanded.
    `credentials` is the unit's credentials directory (%d)."""
    known = {"i": instance, "I": instance, "H": socket.gethostname(), "d": credentials, "%": "%"}

    def expand(m: re.Match[str]) -> str:
        if m.group(1) not in known:
            raise AssertionError(f"specifier %{m.group(1)} in {text!r}: teach expand_specifiers about it")
        return known[m.group(1)]

    return re.sub(r"%(.)", expand, text)


def unit_environment(path: Path, instance: str = "", credentials: str = "") -> dict[str, str]:
    """The variables a unit's Environment= lines set, specifiers expanded."""
    assignments = [
        word for line in unit(path)["Service"].get("Environment", []) for word in shlex.split(line)
    ]
    return dict(expand_specifiers(a, instance, credentials).partition("=")[::2] for a in assignments)


def env_file(path: Path) -> dict[str, str]:
    """An EnvironmentFile= (or compose .env) file: KEY=VALUE lines, # comments, optional quotes."""
    values = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


# --- processes --------------------------------------------------------------------------------------


def tuner_argv(argv: list[str]) -> list[str]:
    """A command line of the installed `tuner` script, as this checkout's code run by this Python."""
    assert argv and argv[0] in ("tuner", INSTALLED_TUNER), f"not a tuner command line: {argv}"
    return [sys.executable, "-m", "tuner.cli", *argv[1:]]


def clean_environment(*layers: dict[str, str]) -> dict[str, str]:
    """This process's environment without any TENSOR_TUNER_* of the caller's, then `layers` in order;
    the processes import this checkout's code whatever their working directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENSOR_TUNER_")}
    for layer in layers:
        env.update(layer)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition: Callable[[], Any], timeout: float, what: Callable[[], str]) -> Any:
    """Poll `condition` until it is truthy; after `timeout` s fail, saying `what()` was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what()}")


class UnitProcess:
    """A subprocess whose output goes to a log file; `stop()` always leaves it dead."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.argv = argv
        self.log = log
        with open(log, "wb") as out:
            self.popen = subprocess.Popen(argv, cwd=log.parent, env=env, stdout=out, stderr=subprocess.STDOUT)

    def running(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then the exit code; SIGKILL (and -9) if it does not exit within `timeout`."""
        if self.running():
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()

    def output(self) -> str:
        return f"$ {shlex.join(self.argv)}\n" + self.log.read_text(errors="replace")[-4000:]


def healthy(url: str, process: UnitProcess) -> bool:
    if not process.running():
        raise AssertionError(f"the coordinator exited with {process.popen.returncode}:\n{process.output()}")
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def workers(url: str, admin_token: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{url}/v1/workers", headers={"Authorization": f"Bearer {admin_token}"}, timeout=5)
    response.raise_for_status()
    return response.json()


def created_token(result: subprocess.CompletedProcess[str]) -> str:
    """The secret printed by `tuner token create` (its last line of standard output)."""
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip().splitlines()[-1]
