"""The pool keeper (kinesim/pool_keeper.py): while clients call, a request of its own every second,
so that a request granian queued without starting a thread for it waits about a second, not until
a held request ends."""
from __future__ import annotations

import socket
import threading

import requests

from conftest import wait_for
from test_edge_safety import _await_status
from kinesim import pool_keeper
from kinesim.pool_keeper import MAX_WAITING, PoolKeeper


class FakeServer:
    """Accepts connections and records each request head; answers them only if `answering`."""

    def __init__(self, answering: bool = True):
        self.answering = answering
        self.heads: list[bytes] = []
        self.held: list[socket.socket] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.heads.append(_await_status(conn))
            if self.answering:
                conn.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
                conn.close()
            else:
                self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_it_calls_only_while_clients_call():
    server, clock = FakeServer(), Clock()
    keeper = PoolKeeper(("127.0.0.1", server.port), f"127.0.0.1:{server.port}", clock=clock)
    try:
        assert not keeper.tick(), "no client has called yet"
        keeper.arrived()
        assert keeper.tick()
        wait_for(lambda: keeper.answered == 1)
        assert server.heads[0].startswith(f"GET {pool_keeper.PATH} HTTP/1.1\r\n".encode())
        assert f"Host: 127.0.0.1:{server.port}\r\n".encode() in server.heads[0]
        clock.now += pool_keeper.ACTIVE_S - 0.5
        assert keeper.tick()
        wait_for(lambda: keeper.answered == 2)
        clock.now += 1
        assert not keeper.tick(), "quiet for ACTIVE_S since the last client's request"
        assert len(server.heads) == 2
    finally:
        server.close()


def test_its_own_unanswered_requests_are_bounded():
    server, clock = FakeServer(answering=False), Clock()
    keeper = PoolKeeper(("127.0.0.1", server.port), f"127.0.0.1:{server.port}", clock=clock)
    try:
        keeper.arrived()
        assert all(keeper.tick() for _ in range(MAX_WAITING))
        assert not keeper.tick(), "as many waiting as it lets wait"
        wait_for(lambda: len(server.heads) == MAX_WAITING)
        server.close()  # answered at last (closed): room for more
        wait_for(lambda: keeper.tick())
    finally:
        server.close()


def test_the_server_answers_its_request_and_refuses_other_sites(server):
    r = requests.get(server.url + pool_keeper.PATH, timeout=30)
    assert r.status_code == 204 and r.content == b""
    r = requests.get(server.url + pool_keeper.PATH, headers={"Origin": "https://example.com"}, timeout=30)
    assert r.status_code == 403
