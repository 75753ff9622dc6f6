"""The client commands of `tuner` against a coordinator (the in-process app) and without one: a
refusal or an unreachable coordinator is one line and exit status 1, never a traceback."""

import json

import httpx
import pytest

from tests.service.conftest import Api, in_process_client
from tests.service.processes import free_port
from tests.service.test_api import HARDWARE, HW, SPEC, lease, register, results, submit
from tuner.cli import main
from tuner.service import commands
from tuner.service.client import Client
from tuner.service.schemas import TaskDetail

WORKLOAD = ["matmul", *(f"{k}={v}" for k, v in SPEC["params"].items())]


@pytest.fixture
def remote(api: Api, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The flags that point a command at the in-process coordinator, with a client token."""

    monkeypatch.setattr(commands, "Client", lambda url, token: in_process_client(api, token))
    return ["--coordinator", "http://testserver", "--token", api.tokens["client"]]


def test_remote_best_and_show_take_a_hardware_key(api: Api, remote: list[str], capsys):
    worker = register(api, "w1")
    register(api, "w2", {**HARDWARE, "key": "other-8c"})
    submit(api, trials=2, hardware=HW.key)
    api.loop.tick()
    results(api, worker, lease(api, worker))
    assert main(["best", *WORKLOAD, *remote, "--json"]) == 1  # two kinds of hardware: which one?
    refusal = capsys.readouterr().err
    assert "hardware" in refusal and "other-8c" in refusal and "Traceback" not in refusal
    assert main(["best", *WORKLOAD, *remote, "--hardware", HW.key, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    assert main(["show", *WORKLOAD, *remote, "--hardware", HW.key]) == 0
    assert "@T.prim_func" in capsys.readouterr().out


def test_submit_wait_outlives_a_coordinator_that_is_away(api: Api, remote: list[str], monkeypatch, capsys):
    worker = register(api, "w1")
    task = Client.task
    away = iter([True])

    def flaky(self: Client, task_id: int) -> TaskDetail:
        if next(away, False):
            raise httpx.ConnectError("connection refused")
        api.loop.tick()
        results(api, worker, lease(api, worker))
        api.loop.tick()
        return task(self, task_id)

    monkeypatch.setattr(Client, "task", flaky)
    monkeypatch.setattr(commands.time, "sleep", lambda _: None)
    assert (
        main(["submit", *WORKLOAD, *remote, "--trials", "2", "--strategy", "random", "--wait", "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["status"] == "done"


@pytest.mark.parametrize("command", [["status"], ["status", "3"], ["cancel", "3"], ["submit", *WORKLOAD]])
def test_an_unreachable_coordinator_is_one_line(command: list[str], capsys):
    nobody = ["--coordinator", f"http://127.0.0.1:{free_port()}", "--token", "t"]
    assert main([*command, *nobody]) == 1
    err = capsys.readouterr().err
    assert "no answer from the coordinator" in err and "Traceback" not in err


def test_the_status_of_an_unknown_task(tmp_path, capsys):
    assert main(["status", "7", "--database", f"sqlite:///{tmp_path / 'tasks.db'}"]) == 1
    assert "no task 7" in capsys.readouterr().err
