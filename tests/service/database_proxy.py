"""A TCP proxy in front of the tests' PostgreSQL server, which a test makes unreachable or frozen: a
database outage without stopping a server other tests share.

- `cut()`: the port refuses connections and every open one is reset, as when the database host or
  its network goes away;
- `freeze()`: connections are accepted and nothing goes through either way, as when the server is
  stopped (SIGSTOP), swapping, or behind a path that swallows packets: TCP notices nothing;
- `strand()`: the open connections go silent for good while new ones go through, as when a failover
  moves the database's address or a NAT drops its state: TCP notices nothing for hours;
- `restore()`: back to forwarding (connections accepted while frozen go through from then on).
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time
from urllib.parse import urlsplit, urlunsplit

from tests.service.processes import free_port


class DatabaseProxy:
    def __init__(self, url: str) -> None:
        """A proxy of the server of the database `url`; `self.url` reaches it through the proxy."""
        parts = urlsplit(url)
        assert parts.hostname and parts.port, url
        self.upstream = (parts.hostname, parts.port)
        self.port = free_port()
        netloc = parts.netloc.rsplit("@", 1)
        address = f"127.0.0.1:{self.port}"
        self.url = urlunsplit(
            parts._replace(netloc=f"{netloc[0]}@{address}" if len(netloc) == 2 else address)
        )
        self.mode = "up"
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="database-proxy", daemon=True)

    def __enter__(self) -> DatabaseProxy:
        self._listener: socket.socket | None = self._listen()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._thread.join()

    def cut(self) -> None:
        self.mode = "down"

    def freeze(self) -> None:
        self.mode = "frozen"

    def strand(self) -> None:
        self.mode = "strand"
        while self.mode == "strand":  # until the proxy's thread has set the open connections aside
            time.sleep(0.01)

    def restore(self) -> None:
        self.mode = "up"

    def _listen(self) -> socket.socket:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        return listener

    def _run(self) -> None:
        listener = self._listener
        peers: dict[socket.socket, socket.socket] = {}  # each end of a forwarded connection -> the other
        parked: list[socket.socket] = []  # accepted while frozen: connected upstream once restored
        stranded: list[socket.socket] = []  # open, never forwarded again
        try:
            while not self._stopping.is_set():
                mode = self.mode
                if mode == "strand":
                    stranded += peers
                    peers.clear()
                    mode = self.mode = "up"
                if mode == "down":
                    if listener is not None:
                        listener.close()
                        listener = None
                    for s in [*peers, *parked]:
                        _reset(s)
                    peers.clear()
                    parked.clear()
                elif listener is None:
                    listener = self._listen()
                if mode == "up":
                    for client in parked:
                        self._connect(client, peers)
                    parked.clear()
                watched = ([listener] if listener else []) + (list(peers) if mode == "up" else [])
                readable, _, _ = select.select(watched, [], [], 0.02) if watched else ([], [], [])
                for s in readable:
                    if s is listener:
                        client, _ = listener.accept()
                        if mode == "up":
                            self._connect(client, peers)
                        else:
                            parked.append(client)
                    elif s in peers:
                        self._forward(s, peers)
        finally:
            for s in [*peers, *parked, *stranded, *([listener] if listener else [])]:
                s.close()

    def _connect(self, client: socket.socket, peers: dict[socket.socket, socket.socket]) -> None:
        try:
            server = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            _reset(client)
            return
        server.settimeout(None)
        peers[client], peers[server] = server, client

    @staticmethod
    def _forward(s: socket.socket, peers: dict[socket.socket, socket.socket]) -> None:
        other = peers[s]
        try:
            data = s.recv(65536)
            if data:
                other.sendall(data)
                return
        except OSError:
            pass
        for end in (s, other):  # one side closed: close the other
            peers.pop(end, None)
            end.close()


def _reset(s: socket.socket) -> None:
    """Close with a TCP reset (linger 0), as a vanished host's network would end it."""
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
