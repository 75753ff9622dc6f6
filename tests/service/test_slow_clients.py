"""Slow clients against a real `tuner serve` on loopback (issue 42): 1,100 connections trickling their
headers held every file descriptor of the coordinator, and every request failed, `/healthz` included.
Now a connection must send its headers within `header_timeout_seconds` and its body within
`body_timeout_seconds`, and the process's descriptor limit is raised: while the slow connections are
held, `/healthz` and a worker's heartbeat are answered at once, and then the slow ones are cut off."""

import resource
import socket
import time
from pathlib import Path

import httpx

from compiler.target import host_hardware
from runner.protocol import HardwareIn
from tests.service.conftest import service_settings
from tests.service.processes import Coordinator
from tuner.database import Database
from tuner.database.tokens import create_token

SLOW_CONNECTIONS = 1100
HEADER_SECONDS, BODY_SECONDS = 3.0, 4.0


def slow_connection(port: int, head: bytes) -> socket.socket:
    """A connection that sends the start of a request and then nothing."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(head)
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(0.5)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def timed(request: callable) -> tuple[int, float]:
    start = time.monotonic()
    status = request().status_code
    return status, time.monotonic() - start


def test_slow_clients_are_cut_off_and_the_api_stays_served(tmp_path: Path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard >= 2 * SLOW_CONNECTIONS, "the test holds its slow connections itself"
    settings = service_settings(f"sqlite:///{tmp_path / 'slow.db'}").model_copy(
        update={"header_timeout_seconds": HEADER_SECONDS, "body_timeout_seconds": BODY_SECONDS}
    )
    with Database.open(settings.database_url) as db:
        worker_token = create_token(db, role="worker", name="w")[1]
    # The coordinator starts with systemd's default soft limit, which 1,100 connections exceed; it
    # raises its own to the hard limit.
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        coordinator = Coordinator(settings, tmp_path).start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2 * SLOW_CONNECTIONS), hard))
    held: list[socket.socket] = []
    try:
        auth = {"Authorization": f"Bearer {worker_token}"}
        body = {"name": "w", "hardware": HardwareIn.of(host_hardware()).model_dump()}
        worker = httpx.post(f"{coordinator.url}/v1/workers", json=body, headers=auth, timeout=10).json()["id"]
        headers = [b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "] * SLOW_CONNECTIONS
        body_first = b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"
        held = [slow_connection(coordinator.port, head) for head in [*headers, body_first]]
        start = time.monotonic()
        with httpx.Client(base_url=coordinator.url, timeout=10) as client:
            health = timed(lambda: client.get("/healthz"))
            beat = timed(
                lambda: client.post(f"/v1/workers/{worker}/heartbeat", json={"holding": []}, headers=auth)
            )
        assert health[0] == 200 and beat[0] == 200
        assert health[1] < 1.0 and beat[1] < 1.0, (health, beat)
        assert time.monotonic() - start < HEADER_SECONDS  # answered while every slow one was held
        time.sleep(BODY_SECONDS + 2.0)
        cut = sum(closed_by_server(sock) for sock in held)
        assert cut == len(held), f"{len(held) - cut} slow connections still open"
        assert httpx.get(f"{coordinator.url}/healthz", timeout=5).status_code == 200
    finally:
        for sock in held:
            sock.close()
        coordinator.stop()
