"""The Kafka port: one asyncio loop in one thread ("kinesim-kafka") serves every connection.

A connection's requests are read and answered one at a time, in order (a Kafka broker mutes a
connection while a request is in flight; clients pipeline and match answers by order). Plain
handlers run in a small thread pool: they touch the store, and the loop never waits on SQLite.
Async handlers (Fetch, which may wait long for records) run on the loop and hand their store work
to the same pool (`Context.blocking`), so a waiting request holds no thread. A frame
that cannot be served (a size out of bounds, an API or version not advertised, a body that does
not parse) closes its own connection only, as the broker does: the client reconnects.
"""
from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import dataclasses
import inspect
import logging
import socket
import threading
import time
import uuid
from typing import Any

from . import codec, sasl
from .context import CloseConnection, Context
from .handlers import sasl as sasl_handlers, versions
from .operations import OPERATIONS

log = logging.getLogger("kinesim.kafka")

MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
MIN_FRAME = 8                  # api key, api version, correlation id
# Between requests: Kafka's connections.max.idle.ms. Clients close their own idle connections at
# 540 s, so producers and consumers quiet between bursts are not cut off.
BETWEEN_REQUESTS_S = 600.0
CLUSTER_DOCUMENT = ("kafka-cluster", "id")
# Fetch: a long poll (max_wait is the client's, up to 2^31 ms) whose client has gone is ended, not
# waited out holding its socket (the Kafka port's fuzz sweep found them piling up). The group
# handlers' waits are left to the coordinator's own session timeouts.
ABANDONED_WITH_CLIENT = frozenset({1})
GONE_CHECK_S = 1.0


def cluster_id(store: Any) -> str:
    """The cluster id of this data directory: made once, kept in a document (Kafka's own form:
    a UUID in URL-safe base64 without padding)."""
    kind, name = CLUSTER_DOCUMENT
    found = store.document(kind, name)
    if found is None:
        found = {"id": base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")}
        store.put_document(kind, name, found)
    return found["id"]


class KafkaListener:
    def __init__(self, services: Any, sock: socket.socket, idle_s: float):
        self.services = services
        self.sock = sock
        self.idle_s = idle_s  # before a connection's first complete request
        self.address = sock.getsockname()
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="kinesim-kafka-work")
        self.cluster_id = cluster_id(services.store)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self._thread = threading.Thread(target=self._run, name="kinesim-kafka", daemon=True)
        self._ready = threading.Event()

    def start(self) -> "KafkaListener":
        self._thread.start()
        self._ready.wait()
        log.info("kafka: listening on %s:%d", self.address[0], self.address[1])
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._close(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(10)
        self.pool.shutdown(wait=True, cancel_futures=True)  # before the store closes

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            self._server = loop.run_until_complete(asyncio.start_server(self._serve, sock=self.sock))
            self._ready.set()
            loop.run_forever()
        finally:
            self._ready.set()
            loop.close()

    async def _close(self) -> None:
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        try:
            await self._requests(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, asyncio.TimeoutError):
            pass  # the client went, or was silent too long
        except (codec.Malformed, CloseConnection) as err:
            log.debug("kafka: closing %s: %s", writer.get_extra_info("peername"), err)
        except asyncio.CancelledError:
            # The server stops (`_close`). Not raised on: Python 3.11's stream callback then logs
            # the cancellation as an error of its own.
            pass
        except Exception:  # a handler's bug: this connection closes, the others carry on
            log.exception("kafka: closing %s after an error", writer.get_extra_info("peername"))
        finally:
            self._connections.discard(task)
            writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("sockname")[:2]
        # Without SASL a connection is in the server's own scope; under --verify-signatures it
        # must authenticate first (kafka/sasl.py).
        session = sasl.Session(required=getattr(self.services, "verifier", None) is not None)
        ctx = Context(kinesis=self.services.own_scope.kinesis, cluster_id=self.cluster_id, host=host, port=port,
                      pool=self.pool, services=self.services, session=session)
        wait = self.idle_s
        while True:
            # The whole request must arrive in time, not just its first byte: a client trickling
            # a frame in is as idle as a silent one.
            deadline = time.monotonic() + wait
            size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), wait), "big", signed=True)
            raw_token = session.raw_token_next  # SaslHandshake v0's bare token: no header, any size
            if not (0 if raw_token else MIN_FRAME) <= size <= MAX_FRAME:
                raise codec.Malformed(f"frame of {size} bytes")  # before reading any of it
            frame = await asyncio.wait_for(reader.readexactly(size), max(0.001, deadline - time.monotonic()))
            if raw_token:
                answer = await asyncio.get_running_loop().run_in_executor(self.pool, sasl_handlers.raw_token,
                                                                          ctx, frame)
            else:
                answer = await self._answer(ctx, frame, reader)
            if session.kinesis is not None and session.kinesis is not ctx.kinesis:
                ctx = dataclasses.replace(ctx, kinesis=session.kinesis)  # authenticated: its scope's topics
            if answer is not None:
                writer.write(answer)
                await writer.drain()
            wait = BETWEEN_REQUESTS_S

    async def _answer(self, ctx: Context, frame: bytes, reader: asyncio.StreamReader) -> bytes | None:
        api_key, version, correlation_id = codec.head(frame)
        if not ctx.session.may_serve(api_key):
            raise CloseConnection(f"api key {api_key} before SASL authentication (--verify-signatures)")
        if api_key == codec.API_VERSIONS and not codec.advertised(api_key, version):
            # Answered, not closed: the client learns the versions served and asks again.
            return codec.encode(api_key, 0, correlation_id, versions.unsupported_version())
        request = codec.decode(frame)  # Malformed: the connection closes
        handler = OPERATIONS[api_key]
        if api_key in ABANDONED_WITH_CLIENT:
            tree = await _unless_client_gone(handler(ctx, request.body), reader)
        elif inspect.iscoroutinefunction(handler):
            tree = await handler(ctx, request.body)
        else:
            tree = await asyncio.get_running_loop().run_in_executor(self.pool, handler, ctx, request.body)
        if tree is None:  # nothing to answer (a Produce with acks=0)
            return None
        return codec.encode(api_key, version, correlation_id, tree)


async def _unless_client_gone(coroutine: Any, reader: asyncio.StreamReader) -> Any:
    """`coroutine`'s result; CloseConnection once the client has closed or reset its end (EOF seen
    with nothing left to read: a pipelined request still buffered keeps it going)."""
    task = asyncio.ensure_future(coroutine)
    try:
        while True:
            done, _ = await asyncio.wait((task,), timeout=GONE_CHECK_S)
            if done:
                return task.result()
            if reader.at_eof() or reader.exception() is not None:
                raise CloseConnection("the client left during a long poll")
    finally:
        if not task.done():
            task.cancel()
