"""Service fixtures: an in-process app (FastAPI's TestClient, the search loop ticked by hand) for the
API's behaviour, and real coordinator and worker processes on loopback for the end-to-end and fault
tests. Every fixture runs on SQLite and on PostgreSQL (`database_url`)."""

from collections.abc import Generator, Iterator
from dataclasses import dataclass, replace

import pytest
from fastapi.testclient import TestClient

from compiler.target import Hardware, host_hardware
from tuner.database import Database
from tuner.database.tokens import create_token
from tuner.service.app import create_app
from tuner.service.client import Client
from tuner.service.settings import HEARTBEATS_PER_LEASE, Settings
from tuner.service.task_loop import TaskLoop


def hardware_body(hardware: Hardware) -> dict:
    """What a worker of `hardware` registers (its key is derived from its target)."""
    t = hardware.target
    return {
        "cpu_model": hardware.cpu_model,
        "triple": t.triple,
        "mcpu": t.mcpu,
        "features": t.features,
        "cores": t.cores,
    }


HW = host_hardware()
HARDWARE = hardware_body(HW)
# Another kind of machine, for tests of what goes to which hardware.
OTHER = Hardware(replace(HW.target, mcpu="other", cores=8), "Other CPU")


def service_settings(database_url: str) -> Settings:
    """Short leases, heartbeats and claims, so fault tests see expiry within seconds."""
    return Settings(
        database_url=database_url,
        lease_seconds=4.0,
        heartbeat_seconds=0.5,
        claim_seconds=4.0,
        tick_seconds=0.05,
        queue_depth=8,
        max_attempts=3,
        max_request_bytes=64 * 1024,
    )


PATIENT_LEASE_SECONDS = 60.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "patient_leases: leases and heartbeats that outlast a loaded host's slowest requests, for a "
        "test that counts the leases it holds and does not heartbeat",
    )


@pytest.fixture
def settings(database_url: str, request: pytest.FixtureRequest) -> Settings:
    settings = service_settings(database_url)
    if request.node.get_closest_marker("patient_leases"):
        # The heartbeat too: a worker silent for MISSED_HEARTBEATS heartbeats is taken for dead and
        # loses its leases, however long they are (a loaded CI host took the test past 1.5 s).
        return settings.model_copy(
            update={
                "lease_seconds": PATIENT_LEASE_SECONDS,
                "heartbeat_seconds": PATIENT_LEASE_SECONDS / HEARTBEATS_PER_LEASE,
            }
        )
    return settings


@dataclass
class Api:
    client: TestClient
    db: Database
    loop: TaskLoop
    tokens: dict[str, str]  # role -> token

    def as_(self, role: str | None) -> dict[str, str]:
        """Headers of a request made with a token of `role` (None: no token)."""
        return {"Authorization": f"Bearer {self.tokens[role]}"} if role else {}


def in_process_client(api: Api, token: str | None) -> Client:
    """The API's client, its requests served by the in-process app instead of the network (by a
    TestClient of its own: whichever of httpx and httpx2 starlette's TestClient is built on, it
    speaks httpx's client API)."""
    client = Client("http://testserver", token)
    client.http = TestClient(api.client.app, base_url="http://testserver", headers=dict(client.http.headers))
    return client


@pytest.fixture
def api(settings: Settings) -> Iterator[Api]:
    app = create_app(settings)
    with TestClient(app) as client:
        db = app.state.db
        tokens = {
            role: create_token(db, role=role, name=f"test {role}")[1]
            for role in ("admin", "client", "worker")
        }
        yield Api(client, db, TaskLoop(db, settings, owner="test-loop"), tokens)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Each phase's report on its item (`item.report_call`), for fixtures that keep evidence of a
    failure (the browser test's screenshot)."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(autouse=True)
def logs_of_a_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a failed test that started processes, the end of each one's log (coordinators, workers)
    in the report: a fault test that times out under CI's load says what the processes were doing."""
    directory = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    report = getattr(request.node, "report_call", None)
    if directory is None or report is None or not report.failed:
        return
    for log in sorted(directory.rglob("*.log")):
        print(f"--- the end of {log.name} ({log.parent.name}) ---")
        print(log.read_text(errors="replace")[-3000:])
