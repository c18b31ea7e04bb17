"""Closing connections that never send a request.

granian serves HTTP/1.1 and h2c on one port ("auto" mode): it reads a new connection's first
bytes to tell the two apart, and that read has no time limit, while its header-read timeout
(`--idle-timeout`, the time a connection may sit idle between requests or halfway through a request's
head) only starts once it knows the protocol. A client that connects and sends nothing would
hold its connection for ever, so a reaper thread closes accepted connections that have received
no byte at all for as long (`--idle-timeout`, 30 s by default), as AWS's endpoints close idle
connections (after tens of seconds: AWS's load balancers, and the SDKs' own pools, close idle
ones at 30-60 s).

A connection that has sent anything is left to granian: it may be a request still being served
(a synchronous Invoke can run 15 minutes without a byte either way).

Linux only (it reads `/proc/self/fd` and each socket's `TCP_INFO`); elsewhere it does nothing.
"""
from __future__ import annotations

import logging
import os
import socket
import struct
import sys
import threading

log = logging.getLogger("kinesim.connections")

# struct tcp_info (linux/tcp.h): the first byte is the state; tcpi_last_data_recv (ms since data
# last arrived, or since the connection was set up when none has) is the u32 at 52 and
# tcpi_bytes_received (Linux 4.1+) the u64 at 128.
_TCP_INFO_SIZE = 136
_ESTABLISHED = 1


class IdleReaper:
    def __init__(self, port: int, idle_s: float, every_s: float | None = None):
        self.port, self.idle_ms = port, idle_s * 1000
        self.every_s = every_s if every_s is not None else min(5.0, max(0.1, idle_s / 4))
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kinesim-idle-reaper", daemon=True)

    def start(self) -> "IdleReaper":
        if sys.platform.startswith("linux"):
            self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def _run(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                closed = self.reap()
            except OSError as err:  # /proc unreadable: nothing to do about it but say so once
                log.warning("cannot look for idle connections: %s", err)
                return
            if closed:
                log.info("closed %d connection(s) that sent nothing for %.0f s", closed, self.idle_ms / 1000)

    def reap(self) -> int:
        """Close this process's accepted connections on our port that never sent a byte and are
        older than the idle time; how many were closed."""
        closed = 0
        for name in os.listdir("/proc/self/fd"):
            try:
                if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                    continue
                # A duplicate of granian's descriptor: shutting it down ends the connection for
                # both (granian reads end-of-file and drops it); closing it leaves granian's open.
                with socket.socket(fileno=os.dup(int(name))) as sock:
                    closed += self._reap_one(sock)
            except OSError:  # closed meanwhile, or not a TCP socket
                continue
        return closed

    def _reap_one(self, sock: socket.socket) -> int:
        if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
            return 0
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) or sock.getsockname()[1] != self.port:
            return 0  # the listener itself, or a connection this process made to somewhere else
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
        if len(info) < _TCP_INFO_SIZE or info[0] != _ESTABLISHED:
            return 0
        silent_ms, = struct.unpack_from("I", info, 52)
        received, = struct.unpack_from("Q", info, 128)
        if received or silent_ms < self.idle_ms:
            return 0
        sock.shutdown(socket.SHUT_RDWR)
        return 1
