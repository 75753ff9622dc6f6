"""deploy/compose.yaml: PostgreSQL, the coordinator and two pinned workers. No Docker engine runs here,
so the file is checked as data, and each container's command (the image's entrypoint and the service's
command, in the environment the image and the service give it) is run as a process on loopback."""

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from deploy_helpers import (
    DEPLOY,
    ROOT,
    UnitProcess,
    clean_environment,
    compose,
    created_token,
    dockerfile,
    env_file,
    environment_list,
    free_port,
    healthy,
    interpolate,
    settings_from,
    tuner_argv,
    wait_until,
    workers,
)

from tuner.database import Database
from tuner.database.tokens import create_token
from tuner.service.task_loop import STOP_SECONDS

TUNER_SERVICES = ("coordinator", "worker-0", "worker-1")
WORKERS = ("worker-0", "worker-1")


def example_variables(**overrides: str) -> dict[str, str]:
    """The variables compose would read from deploy/.env, made from compose.env.example."""
    return {**env_file(DEPLOY / "compose.env.example"), **overrides}


def services(**variables: str) -> dict:
    return interpolate(compose(), example_variables(**variables))["services"]


def test_four_services():
    assert set(compose()["services"]) == {"postgres", *TUNER_SERVICES}


SECRETS = {"postgres": "postgres_password", "coordinator": "database_url", "worker-0": "worker_token"}
# Variables that would put a password or a token in an environment, where `docker inspect` and every
# process of the container read it.
SECRET_VARIABLES = {"POSTGRES_PASSWORD", "TENSOR_TUNER_DATABASE_URL", "TENSOR_TUNER_TOKEN"}


def test_secrets_are_files_never_environment_variables():
    """The probe found the worker token passed as an environment variable: now every secret is a
    Docker secret from a file under deploy/secrets/ (git-ignored), read through a *_FILE variable."""
    data = compose()
    assert {name: spec["file"] for name, spec in data["secrets"].items()} == {
        secret: f"./secrets/{secret}" for secret in set(SECRETS.values())
    }
    for name, service in services().items():
        env = environment_list(service.get("environment"))
        assert not SECRET_VARIABLES & set(env), f"{name} has a secret in its environment"
        for variable, value in env.items():
            if variable.endswith("_FILE"):
                assert value.startswith("/run/secrets/") and value.split("/")[-1] in service["secrets"]
    assert "deploy/secrets/" in (ROOT / ".gitignore").read_text().splitlines()


def test_postgres_is_checked_and_keeps_its_data():
    postgres = services()["postgres"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert any(v.split(":")[1] == "/var/lib/postgresql/data" for v in postgres["volumes"])
    assert not postgres.get("ports"), "only the coordinator talks to the database"


def test_coordinator_waits_for_postgres_and_is_checked():
    s = services()
    coordinator = s["coordinator"]
    assert coordinator["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert coordinator["healthcheck"]["test"][0] == "CMD"
    assert environment_list(coordinator["environment"])["TENSOR_TUNER_DATABASE_URL_FILE"] == (
        "/run/secrets/database_url"
    )
    postgres = environment_list(s["postgres"]["environment"])
    assert postgres["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_password"


def _published(port: str | dict) -> tuple[str, str]:
    """(host address, container port) of a `ports:` entry, short or long syntax."""
    if isinstance(port, dict):
        return port.get("host_ip", ""), str(port["target"])
    parts = str(port).rsplit(":", 2)
    if len(parts) < 3:  # "8000" or "8000:8000": docker binds every host address
        return "", parts[-1]
    return parts[0].strip("[]"), parts[2]


def test_no_port_is_published_beyond_loopback(tmp_path):
    for name, service in services().items():
        for port in service.get("ports", []):
            host, _ = _published(port)
            assert host in ("127.0.0.1", "::1"), f"{name} publishes {port} on every address of the host"
    coordinator = services()["coordinator"]
    env = {**dockerfile().env, **environment_list(coordinator["environment"]), **secret_files(tmp_path)}
    assert [_published(p)[1] for p in coordinator["ports"]] == [str(settings_from(env).port)]


def test_workers_reach_the_coordinator_with_a_token():
    s = services()
    for name in WORKERS:
        worker = s[name]
        env = environment_list(worker["environment"])
        url = urlsplit(env["TENSOR_TUNER_COORDINATOR_URL"])
        assert (url.hostname, str(url.port)) == ("coordinator", "8000")
        assert env["TENSOR_TUNER_TOKEN_FILE"] == "/run/secrets/worker_token"
        assert worker["secrets"] == ["worker_token"]
        assert worker["depends_on"]["coordinator"]["condition"] == "service_healthy"


def test_workers_are_pinned_to_disjoint_cpus_without_quotas():
    s = services()
    cpus = {}
    for name in WORKERS:
        worker = s[name]
        env = environment_list(worker["environment"])
        assert worker["cpuset"] == env["TENSOR_TUNER_WORKER_CPUS"], "the container and the worker disagree"
        cpus[name] = _cpu_list(worker["cpuset"])
        throttles = {"cpus", "cpu_quota", "cpu_period", "cpu_shares", "cpu_count", "cpu_percent"}
        assert not throttles & set(worker), f"{name}: a CPU quota throttles the code being timed"
        assert "cpus" not in worker.get("deploy", {}).get("resources", {}).get("limits", {})
    assert not cpus["worker-0"] & cpus["worker-1"]


def _cpu_list(text: str) -> set[int]:
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def test_workers_have_time_to_finish_a_candidate_on_stop():
    for name in WORKERS:
        grace = services()[name]["stop_grace_period"]
        assert grace.endswith("m") and int(grace[:-1]) >= 3


def test_the_coordinator_has_time_to_stop_its_search_loop():
    grace = services()["coordinator"]["stop_grace_period"]
    assert grace.endswith("s") and int(grace[:-1]) >= STOP_SECONDS + 30


def secret_files(directory: Path, token: str = "tt_x", database: str = "sqlite://") -> dict[str, str]:
    """What Docker mounts at /run/secrets, made in `directory`: the *_FILE variables pointing there."""
    (directory / "database_url").write_text(database + "\n")
    (directory / "worker_token").write_text(token + "\n")
    return {
        "TENSOR_TUNER_DATABASE_URL_FILE": str(directory / "database_url"),
        "TENSOR_TUNER_TOKEN_FILE": str(directory / "worker_token"),
    }


def test_every_variable_is_a_setting_and_parses(tmp_path):
    files = secret_files(tmp_path)
    for name in TUNER_SERVICES:
        env = {**dockerfile().env, **environment_list(services()[name]["environment"])}
        settings_from({k: files.get(k, v) for k, v in env.items()})


def container(
    name: str, variables: dict[str, str], command: list[str] | None = None, **overrides: str
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of service `name`'s container (`command` replaces the
    service's, as `docker compose run SERVICE COMMAND...` does), with `overrides` for what differs on
    this machine: there are no `postgres` and `coordinator` hosts here."""
    service = services(**variables)[name]
    image = dockerfile()
    argv = service.get("entrypoint", image.entrypoint) + (command or service.get("command", image.cmd))
    env = clean_environment(image.env, environment_list(service.get("environment")), overrides)
    return tuner_argv(argv), env


def test_the_containers_commands_run(tmp_path):
    """The coordinator starts as its container would (entrypoint + command, image and service
    environment) and its healthcheck passes; the documented `docker compose run --rm coordinator token
    create --role worker` makes a token; both workers start as their containers would, register,
    and exit 0 on SIGTERM, as does the coordinator."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    database = f"sqlite:///{tmp_path / 'tuning.db'}"
    run_secrets = tmp_path / "secrets"
    run_secrets.mkdir(mode=0o700)
    files = secret_files(run_secrets, token="", database=database)  # no postgres host here
    on_this_machine = {
        "TENSOR_TUNER_DATABASE_URL_FILE": files["TENSOR_TUNER_DATABASE_URL_FILE"],
        "TENSOR_TUNER_HOST": "127.0.0.1",  # the image binds 0.0.0.0; a test need not
        "TENSOR_TUNER_PORT": str(port),
    }
    cpus = sorted(os.sched_getaffinity(0))
    variables = {"WORKER_0_CPUS": str(cpus[0]), "WORKER_1_CPUS": str(cpus[-1])}
    argv, coordinator_env = container("coordinator", variables, **on_this_machine)
    check = services()["coordinator"]["healthcheck"]["test"]
    assert check[:2] == ["CMD", "python"]
    healthcheck = [sys.executable, *check[2:]]
    started: list[UnitProcess] = []
    try:
        coordinator = UnitProcess(argv, coordinator_env, tmp_path / "coordinator.log")
        started.append(coordinator)
        wait_until(lambda: healthy(url, coordinator), 60, lambda: f"/healthz:\n{coordinator.output()}")
        assert subprocess.run(healthcheck, env=coordinator_env, timeout=60).returncode == 0

        command = ["token", "create", "--role", "worker", "--name", "compose-workers"]
        argv, env = container("coordinator", variables, command, **on_this_machine)
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        (run_secrets / "worker_token").write_text(created_token(result) + "\n")  # as the README says
        with Database.open(database) as db:
            admin = create_token(db, role="admin", name="test")[1]

        for name in WORKERS:
            argv, env = container(
                name,
                variables,
                TENSOR_TUNER_COORDINATOR_URL=url,
                TENSOR_TUNER_TOKEN_FILE=files["TENSOR_TUNER_TOKEN_FILE"],
            )
            started.append(UnitProcess(argv, env, tmp_path / f"{name}.log"))
        wait_until(
            lambda: {w["name"] for w in workers(url, admin) if w["alive"]} == set(WORKERS),
            60,
            lambda: "both workers to register:\n" + "\n".join(p.output() for p in started[1:]),
        )
        for worker in started[1:]:
            assert worker.stop() == 0, worker.output()
        assert not any(w["alive"] for w in workers(url, admin)), "a worker left without saying goodbye"
        assert coordinator.stop() == 0, coordinator.output()
        down = subprocess.run(healthcheck, env=coordinator_env, capture_output=True, timeout=60)
        assert down.returncode != 0, "the healthcheck passes with the coordinator down"
    finally:
        for process in started:
            process.stop()
