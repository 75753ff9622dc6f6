"""deploy/systemd: the coordinator unit and the worker template. Their ExecStart lines, with the
specifiers expanded and the environment of the example env files, are run here as processes: the
coordinator serves /healthz, a worker instance registers pinned to its instance's CPUs, and both exit
0 on the SIGTERM systemd sends them."""

import os
import shutil
import subprocess

import httpx
import pytest
from deploy_helpers import (
    INSTALLED_TUNER,
    SYSTEMD,
    UnitProcess,
    clean_environment,
    created_token,
    env_file,
    expand_specifiers,
    free_port,
    healthy,
    settings_from,
    tuner_argv,
    unit,
    unit_environment,
    wait_until,
    workers,
)

from tuner.database import Database
from tuner.database.tokens import create_token
from tuner.service.settings import Settings
from tuner.service.task_loop import STOP_SECONDS

COORDINATOR = SYSTEMD / "tensor-tuner-coordinator.service"
WORKER = SYSTEMD / "tensor-tuner-worker@.service"
ENV_FILES = {COORDINATOR: SYSTEMD / "coordinator.env", WORKER: SYSTEMD / "worker.env"}


def service(path):
    return {key: values[-1] for key, values in unit(path)["Service"].items()}


def exec_start(path, instance=""):
    (line,) = unit(path)["Service"]["ExecStart"]
    return tuner_argv(expand_specifiers(line, instance).split())


def example_environment(path):
    """What EnvironmentFile= gives the unit, if /etc/tensor-tuner holds the example file."""
    (shipped,) = service(path)["EnvironmentFile"].split()
    assert shipped == f"/etc/tensor-tuner/{ENV_FILES[path].name}", "the README copies the examples there"
    return env_file(ENV_FILES[path])


@pytest.mark.parametrize("path", [COORDINATOR, WORKER], ids=lambda p: p.name)
def test_unit_restarts_stops_gracefully_and_is_hardened(path):
    s = service(path)
    assert s["Restart"] == "on-failure"
    assert s["KillSignal"] == "SIGTERM"
    # SIGTERM to the main process only: a worker's build and measurement processes must finish the
    # candidate it is timing.
    assert s["KillMode"] == "mixed"
    assert s["User"] != "root" and s["NoNewPrivileges"] == "yes" and s["ProtectSystem"] == "strict"
    assert s["ExecStart"].split()[0] == INSTALLED_TUNER
    assert "multi-user.target" in unit(path)["Install"]["WantedBy"]


def test_the_coordinator_may_write_its_state_directory_only():
    s = service(COORDINATOR)
    assert s["WorkingDirectory"] == f"/var/lib/{s['StateDirectory']}"
    assert "ReadWritePaths" not in s


def test_a_worker_has_time_to_finish_its_candidate():
    """A build may take 30 s and a run 60 s, both twice when a new best is re-measured, and the
    results are then submitted with retries for up to worker_max_backoff_seconds."""
    assert int(service(WORKER)["TimeoutStopSec"]) >= 2 * (30 + 60) + Settings().worker_max_backoff_seconds


def test_the_coordinator_has_time_to_stop_its_search_loop():
    """The loop gets STOP_SECONDS to release its tasks, the API some seconds besides."""
    assert int(service(COORDINATOR)["TimeoutStopSec"]) >= STOP_SECONDS + 30


def test_a_worker_instance_is_its_cpu_list():
    argv = exec_start(WORKER, "4-7")
    assert argv[argv.index("--cpus") + 1] == "4-7"


def worker_credential() -> str:
    """The name of the worker unit's one credential, the token, loaded from where the README puts it."""
    (line,) = unit(WORKER)["Service"]["LoadCredential"]
    name, _, source = line.partition(":")
    assert source == "/etc/tensor-tuner/worker.token", "deploy/README.md installs the token there"
    return name


def test_the_worker_token_is_a_credential_in_no_command_line_or_environment_file():
    """The token reaches the worker as a file only (TENSOR_TUNER_TOKEN_FILE in the credentials
    directory): a command line is readable by every user, and an environment is inherited by every
    measurement process."""
    assert unit_environment(WORKER, credentials="/run/credentials/x") == {
        "TENSOR_TUNER_TOKEN_FILE": f"/run/credentials/x/{worker_credential()}"
    }
    assert not {"TENSOR_TUNER_TOKEN", "TENSOR_TUNER_TOKEN_FILE"} & set(env_file(ENV_FILES[WORKER]))
    assert "token" not in unit(WORKER)["Service"]["ExecStart"][0]


def test_the_database_url_is_a_credential_in_no_environment_file():
    """The coordinator's database password reaches it as a file only, as the worker's token does: its
    environment is inherited by the search loop and every model-import child."""
    (line,) = unit(COORDINATOR)["Service"]["LoadCredential"]
    name, _, source = line.partition(":")
    assert source == "/etc/tensor-tuner/database_url", "deploy/README.md installs the URL there"
    assert unit_environment(COORDINATOR, credentials="/run/credentials/x") == {
        "TENSOR_TUNER_DATABASE_URL_FILE": f"/run/credentials/x/{name}"
    }
    assert not {"TENSOR_TUNER_DATABASE_URL", "TENSOR_TUNER_DATABASE_URL_FILE"} & set(
        env_file(ENV_FILES[COORDINATOR])
    )


@pytest.mark.parametrize("path", [COORDINATOR, WORKER], ids=lambda p: p.name)
def test_env_file_sets_known_settings_that_parse(path):
    settings_from(example_environment(path))


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_systemd_accepts_the_units(tmp_path):
    """systemd's own parser, with the venv's tuner replaced by an executable that exists here: any
    unknown directive or bad value is reported (and only ignored, so any output fails)."""
    for path in (COORDINATOR, WORKER):
        text = path.read_text().replace(INSTALLED_TUNER, shutil.which("true") or "/bin/true")
        (tmp_path / path.name).write_text(text)
    result = subprocess.run(
        ["systemd-analyze", "verify", COORDINATOR.name, "tensor-tuner-worker@0-3.service"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_the_units_commands_run(tmp_path):
    """The coordinator's ExecStart serves /healthz; a worker token is made as the README says; an
    instance of the worker template (named after a CPU this machine has) registers, pinned to it; each
    exits 0 on SIGTERM."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    database = f"sqlite:///{tmp_path / 'tuning.db'}"
    # What systemd does with LoadCredential=: the files, copied into the unit's own directory. The
    # database URL is this machine's (no database host here).
    credentials = tmp_path / "credentials"
    credentials.mkdir(mode=0o700)
    (credentials / "database_url").write_text(database + "\n")
    # What differs on this machine besides: no network to serve.
    coordinator_env = clean_environment(
        example_environment(COORDINATOR),
        unit_environment(COORDINATOR, credentials=str(credentials)),
        {"TENSOR_TUNER_HOST": "127.0.0.1", "TENSOR_TUNER_PORT": str(port)},
    )
    started: list[UnitProcess] = []
    try:
        coordinator = UnitProcess(exec_start(COORDINATOR), coordinator_env, tmp_path / "coordinator.log")
        started.append(coordinator)
        wait_until(lambda: healthy(url, coordinator), 60, lambda: f"/healthz:\n{coordinator.output()}")

        command = tuner_argv(["tuner", "token", "create", "--role", "worker", "--name", "bench-01"])
        result = subprocess.run(command, env=coordinator_env, capture_output=True, text=True, timeout=120)
        token = created_token(result)
        with Database.open(database) as db:
            admin = create_token(db, role="admin", name="test")[1]

        instance = str(max(os.sched_getaffinity(0)))
        (credentials / worker_credential()).write_text(token + "\n")
        worker_env = clean_environment(
            example_environment(WORKER),
            unit_environment(WORKER, instance, str(credentials)),
            {"TENSOR_TUNER_COORDINATOR_URL": url},
        )
        worker = UnitProcess(exec_start(WORKER, instance), worker_env, tmp_path / "worker.log")
        started.append(worker)
        name = expand_specifiers("%H:%I", instance)
        wait_until(
            lambda: [w for w in workers(url, admin) if w["alive"] and w["name"] == name],
            60,
            lambda: f"worker {name} to register:\n{worker.output()}",
        )
        assert os.sched_getaffinity(worker.popen.pid) == {int(instance)}
        # The worker logs this once the coordinator's reply is in: after the coordinator lists it.
        wait_until(
            lambda: "awaits an admin's approval" in worker.output(),
            30,
            lambda: f"worker {name} to say it awaits approval:\n{worker.output()}",
        )
        # As the README says: an admin approves the worker's kind of machine on the coordinator's.
        approve = tuner_argv(["tuner", "hardware", "approve", "1"])
        result = subprocess.run(approve, env=coordinator_env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        (kind,) = httpx.get(f"{url}/v1/hardware", headers={"Authorization": f"Bearer {admin}"}).json()
        assert kind["approved"] and kind["key"].endswith("-1c")
        assert worker.stop() == 0, worker.output()
        assert not any(w["alive"] for w in workers(url, admin)), "the worker left without saying goodbye"
        assert coordinator.stop() == 0, coordinator.output()
    finally:
        for process in started:
            process.stop()
