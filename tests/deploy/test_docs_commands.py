"""Every `tuner` command line that deploy/README.md and compose.yaml tell an operator to type parses:
renamed commands or flags fail here rather than in someone's deployment."""

import re
import shlex

import pytest
from deploy_helpers import DEPLOY

from tuner.cli import _parser

# `tuner ARGS` (also as .../bin/tuner) or `docker compose run --rm [-e ...] coordinator ARGS`.
COMMAND = re.compile(
    r"(?:^|[\s/])tuner (?P<tuner>[^'#]*)|docker compose run --rm (?:-e \S+ +)*coordinator (?P<run>[^'#]*)"
)


def _code_lines() -> list[str]:
    readme = (DEPLOY / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.DOTALL)
    compose_comments = [line.lstrip("# ") for line in (DEPLOY / "compose.yaml").read_text().splitlines()]
    text = "\n".join([*blocks, *[line for line in compose_comments if line.startswith("docker ")]])
    return re.sub(r"\\\n\s*", " ", text).splitlines()


def _commands() -> list[str]:
    return [
        (m.group("tuner") or m.group("run")).strip() for line in _code_lines() for m in COMMAND.finditer(line)
    ]


def test_the_docs_show_commands():
    assert len(_commands()) >= 8, _commands()


@pytest.mark.parametrize("command", _commands())
def test_documented_command_parses(command):
    try:
        _parser().parse_args(shlex.split(command))
    except SystemExit as e:
        pytest.fail(f"`tuner {command}` does not parse (exit {e.code})")
