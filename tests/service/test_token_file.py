"""Tokens off the command line: `--token-file PATH` or TENSOR_TUNER_TOKEN_FILE (a systemd credential,
a Docker secret, a file of mode 0600) for workers and every client command, because a process's
command line (/proc/PID/cmdline) is readable by every user of the machine."""

from pathlib import Path

import httpx
import pytest

from tests.service.conftest import Api, in_process_client, service_settings
from tests.service.processes import Coordinator, Process, environment, wait_until
from tuner.cli import _parser, main
from tuner.cli import service as commands
from tuner.database import Database
from tuner.database.tokens import create_token
from tuner.service.settings import Settings


def token_file(directory: Path, text: str) -> Path:
    path = directory / "token"
    path.write_text(text)
    path.chmod(0o600)
    return path


def settings_of(argv: list[str]) -> Settings:
    return commands.settings_from(_parser().parse_args(argv))


def test_the_token_is_the_files_first_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = token_file(tmp_path, "tt_secret\n")
    assert settings_of(["status", "--token-file", str(path)]).bearer_token() == "tt_secret"
    monkeypatch.setenv("TENSOR_TUNER_TOKEN_FILE", str(path))
    assert settings_of(["status"]).bearer_token() == "tt_secret"
    assert token_file(tmp_path, "\n").exists() and settings_of(["status"]).bearer_token() is None


def test_a_flag_wins_over_the_other_way_in_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = token_file(tmp_path, "tt_from_file")
    monkeypatch.setenv("TENSOR_TUNER_TOKEN", "tt_from_environment")
    assert settings_of(["status", "--token-file", str(path)]).bearer_token() == "tt_from_file"
    monkeypatch.delenv("TENSOR_TUNER_TOKEN")
    monkeypatch.setenv("TENSOR_TUNER_TOKEN_FILE", str(path))
    assert settings_of(["status", "--token", "tt_flag"]).bearer_token() == "tt_flag"


def test_two_tokens_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = token_file(tmp_path, "tt_a")
    with pytest.raises(SystemExit, match="token or token_file, not both"):
        settings_of(["status", "--token-file", str(path), "--token", "tt_b"])
    monkeypatch.setenv("TENSOR_TUNER_TOKEN", "tt_b")
    monkeypatch.setenv("TENSOR_TUNER_TOKEN_FILE", str(path))
    with pytest.raises(SystemExit, match="token or token_file, not both"):
        settings_of(["status"])


def test_client_commands_send_the_files_token(
    api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setattr(commands, "Client", lambda url, token: in_process_client(api, token))
    path = token_file(tmp_path, api.tokens["client"] + "\n")
    remote = ["--coordinator", "http://testserver"]
    assert main(["status", *remote, "--token-file", str(path), "--json"]) == 0
    assert capsys.readouterr().out.strip() == "[]"
    with pytest.raises(SystemExit, match="cannot read the token file"):
        main(["status", *remote, "--token-file", str(tmp_path / "missing")])


def test_a_worker_reads_its_token_from_a_file_not_its_command_line(tmp_path: Path):
    """How the token reaches the worker does not depend on the database: SQLite only."""
    settings = service_settings(f"sqlite:///{tmp_path / 'tuning.db'}")
    with Database.open(settings.database_url) as db:
        secret = create_token(db, role="worker", name="bench")[1]
        admin = create_token(db, role="admin", name="admin")[1]
    path = token_file(tmp_path, secret + "\n")
    coordinator = Coordinator(settings, tmp_path).start()
    worker = None
    try:
        args = ["worker", "--coordinator", coordinator.url, "--token-file", str(path), "--runner", "null"]
        worker = Process([*args, "--name", "filed"], environment(settings), tmp_path / "worker.log")
        wait_until(lambda: "filed" in alive(coordinator.url, admin), 60, "the worker to register")
        assert secret.encode() not in Path(f"/proc/{worker.pid}/cmdline").read_bytes()
        assert worker.stop() == 0, worker.output()
        without = Process(
            ["worker", "--coordinator", coordinator.url], environment(settings), tmp_path / "w2.log"
        )
        assert without.wait(60) == 2 and "TENSOR_TUNER_TOKEN_FILE" in without.output()
        without.stop()
    finally:
        if worker is not None:
            worker.stop()
        coordinator.stop()


def alive(url: str, admin: str) -> list[str]:
    fleet = httpx.get(f"{url}/v1/workers", headers={"Authorization": f"Bearer {admin}"}, timeout=5).json()
    return [w["name"] for w in fleet if w["alive"]]
