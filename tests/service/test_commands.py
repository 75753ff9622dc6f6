"""The client commands of `tuner` against a coordinator (the in-process app) and without one: a
refusal, an unreachable coordinator or an answer the client cannot read is one line and exit status
1, never a traceback; `--json` prints the coordinator's answers unchanged."""

import json

import httpx
import pytest

from tests.service.conftest import OTHER, Api, hardware_body, in_process_client
from tests.service.processes import free_port
from tests.service.test_api import HW, SPEC, lease, measure, register, submit
from tuner.cli import main
from tuner.cli import service as commands
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
    register(api, "w2", hardware_body(OTHER))
    submit(api, trials=2, hardware=HW.key)
    api.loop.tick()
    measure(api, worker, lease(api, worker))
    assert main(["best", *WORKLOAD, *remote, "--json"]) == 1  # two kinds of hardware: which one?
    refusal = capsys.readouterr().err
    assert "hardware" in refusal and OTHER.key in refusal and "Traceback" not in refusal
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
        measure(api, worker, lease(api, worker))
        api.loop.tick()
        return task(self, task_id)

    monkeypatch.setattr(Client, "task", flaky)
    monkeypatch.setattr(commands.time, "sleep", lambda _: None)
    assert (
        main(["submit", *WORKLOAD, *remote, "--trials", "2", "--strategy", "random", "--wait", "--json"]) == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == "done"
    assert printed == api.client.get(f"/v1/tasks/{printed['id']}", headers=api.as_("client")).json()


def test_json_outputs_are_the_coordinators_answers_unchanged(api: Api, remote: list[str], capsys):
    worker = register(api)
    assert main(["submit", *WORKLOAD, *remote, "--trials", "2", "--strategy", "random", "--json"]) == 0
    submitted = capsys.readouterr().out
    (listed,) = api.client.get("/v1/tasks", headers=api.as_("client")).json()
    assert submitted == json.dumps(listed, indent=2) + "\n"
    api.loop.tick()
    measure(api, worker, lease(api, worker))
    api.loop.tick()
    assert main(["status", *remote, "--json"]) == 0
    answer = api.client.get("/v1/tasks", headers=api.as_("client")).json()
    assert capsys.readouterr().out == json.dumps(answer, indent=2) + "\n"
    assert main(["status", str(listed["id"]), *remote, "--json"]) == 0
    answer = api.client.get(f"/v1/tasks/{listed['id']}", headers=api.as_("client")).json()
    assert answer["best"] and capsys.readouterr().out == json.dumps([answer], indent=2) + "\n"
    assert main(["best", *WORKLOAD, *remote, "--top", "2", "--json"]) == 0
    records = api.client.post("/v1/best", json={"workload": SPEC, "k": 2}, headers=api.as_("client")).json()
    rows = [
        {
            "record": r["id"],
            "gflops": round(r["gflops"], 2),
            "median_secs": r["median_secs"],
            "trace": r["trace"],
        }
        for r in records
    ]
    assert len(rows) == 2 and capsys.readouterr().out == json.dumps(rows, indent=2) + "\n"


def test_plain_outputs(api: Api, remote: list[str], capsys):
    register(api)
    assert main(["submit", *WORKLOAD, *remote, "--trials", "2"]) == 0
    assert capsys.readouterr().out == "task 1: pending\n"
    assert main(["status", *remote]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert [cell.strip() for cell in row.split("│")[1:-1]] == ["1", "matmul", HW.key, "pending", "0/2", "-"]
    assert main(["cancel", "1", *remote]) == 0
    assert capsys.readouterr().out == "task 1: cancelled\n"


def test_the_embedded_status_lists_the_database_files_tasks(api: Api, settings, capsys):
    register(api)
    submit(api, trials=2)
    assert main(["status", "--database", settings.database_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {
            "id": 1,
            "workload_name": "matmul",
            "hardware_key": HW.key,
            "status": "pending",
            "trials_done": 0,
            "trials": 2,
            "best": None,
        }
    ]


@pytest.mark.parametrize(
    "answer", [httpx.Response(200, json={"id": 3, "status": "done"}), httpx.Response(200, text="<html>")]
)
def test_an_answer_the_client_cannot_read_is_one_line(answer: httpx.Response, monkeypatch, capsys):
    def impostor(url: str, token: str | None) -> Client:
        client = Client(url, token)
        client.http = httpx.Client(base_url=url, transport=httpx.MockTransport(lambda request: answer))
        return client

    monkeypatch.setattr(commands, "Client", impostor)
    assert main(["status", "3", "--coordinator", "http://elsewhere", "--token", "t"]) == 1
    err = capsys.readouterr().err
    assert "an answer this client cannot read" in err and "GET /v1/tasks/3" in err
    assert "Traceback" not in err and "KeyError" not in err


@pytest.mark.parametrize("command", [["status"], ["status", "3"], ["cancel", "3"], ["submit", *WORKLOAD]])
def test_an_unreachable_coordinator_is_one_line(command: list[str], capsys):
    nobody = ["--coordinator", f"http://127.0.0.1:{free_port()}", "--token", "t"]
    assert main([*command, *nobody]) == 1
    err = capsys.readouterr().err
    assert "no answer from the coordinator" in err and "Traceback" not in err


def test_the_status_of_an_unknown_task(tmp_path, capsys):
    assert main(["status", "7", "--database", f"sqlite:///{tmp_path / 'tasks.db'}"]) == 1
    assert "no task 7" in capsys.readouterr().err
