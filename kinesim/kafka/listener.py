"""The Kafka port: one asyncio loop in one thread ("kinesim-kafka") serves every connection.

A connection's frames are read ahead while earlier ones are handled (clients pipeline up to
max.in.flight requests), reads overlap, writes keep the order they were sent in, and answers are
written strictly in request order, as clients match them (`_Pipeline`, at the end). Plain
handlers run in a small thread pool: they touch the store, and the loop never waits on SQLite.
Async handlers (Fetch, which may wait long for records) run on the loop and hand their store work
to the same pool (`Context.blocking`), so a waiting request holds no thread. A frame
that cannot be served (a size out of bounds, an API or version not advertised, a body that does
not parse) closes its own connection only, as the broker does: the client reconnects.
"""
from __future__ import annotations

import asyncio
import base64
import collections
import concurrent.futures
import dataclasses
import inspect
import logging
import socket
import threading
import time
import uuid
from typing import Any, Callable

from . import batches, codec, sasl
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
        # aiokafka's record classes, once, before any work thread wants them (kafka/batches.py).
        records = batches.load()
        if records != "cython":
            log.warning("kafka: aiokafka's record batches are its pure-Python ones (no C extension, or "
                        "AIOKAFKA_NO_EXTENSIONS set): Produce and Fetch will be several times slower")
        self._thread.start()
        self._ready.wait()
        log.info("kafka: listening on %s:%d (record batches: aiokafka, %s)", self.address[0], self.address[1],
                 records)
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
        # Then what they left running (requests cancelled but not yet finished, long polls' inner
        # tasks): a task still pending when the loop closes is logged as an error at every stop.
        rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

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
        """Read a connection's frames ahead (up to PIPELINE not yet answered), start each as it
        comes under the ordering rules of `_Pipeline.start`, and write the answers strictly in
        the order of the requests."""
        conn = _Pipeline()
        reading = asyncio.ensure_future(self._read_frames(reader, writer, conn))
        writing = asyncio.ensure_future(_write_answers(conn, writer))
        try:
            await writing  # ends at the reader's end-of-stream mark, or raises the first failure
        finally:
            reading.cancel()
            try:
                await asyncio.gather(reading, return_exceptions=True)
            finally:
                # After the reader's end: its last act may be to queue a cut-short frame's failure,
                # which nobody would retrieve (asyncio logs it) if dropped before.
                conn.drop()

    async def _read_frames(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           conn: "_Pipeline") -> None:
        host, port = writer.get_extra_info("sockname")[:2]
        # Without SASL a connection is in the server's own scope; under --verify-signatures it
        # must authenticate first (kafka/sasl.py).
        session = sasl.Session(required=getattr(self.services, "verifier", None) is not None)
        ctx = Context(kinesis=self.services.own_scope.kinesis, cluster_id=self.cluster_id, host=host, port=port,
                      pool=self.pool, services=self.services, session=session)
        wait = self.idle_s
        loop = asyncio.get_running_loop()
        try:
            while True:
                await conn.room()
                # The whole request must arrive in time, not just its first byte: a client
                # trickling a frame in is as idle as a silent one.
                deadline = time.monotonic() + wait
                size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), wait), "big", signed=True)
                raw_token = session.raw_token_next  # SaslHandshake v0's bare token: no header, any size
                if not (0 if raw_token else MIN_FRAME) <= size <= MAX_FRAME:
                    raise codec.Malformed(f"frame of {size} bytes")  # before reading any of it
                frame = await asyncio.wait_for(reader.readexactly(size), max(0.001, deadline - time.monotonic()))
                wait = BETWEEN_REQUESTS_S
                if raw_token:
                    job = conn.start(lambda: loop.run_in_executor(self.pool, sasl_handlers.raw_token, ctx, frame),
                                     WRITE)
                else:
                    api_key = codec.head(frame)[0]
                    # SASL changes how the next frame is read and in which scope: nothing more is
                    # read until it is answered; nor before a required authentication.
                    kind = BARRIER if api_key in SASL_KEYS or (session.required and session.kinesis is None) \
                        else READ if api_key in READS else WRITE
                    job = conn.start(lambda c=ctx, f=frame: self._answer(c, f, reader, conn), kind)
                if raw_token or kind == BARRIER:
                    await asyncio.wait((job,))  # its failure is the writer's to raise, in order
                    if job.cancelled() or job.exception() is not None:
                        return
                    if session.kinesis is not None and session.kinesis is not ctx.kinesis:
                        ctx = dataclasses.replace(ctx, kinesis=session.kinesis)  # authenticated: its scope's topics
        except asyncio.IncompleteReadError as eof:
            if eof.partial:
                conn.fail(eof)  # a frame cut short: the connection closes once the earlier ones are answered
            else:
                conn.end()  # the client closed its end: answer what it sent, then close
        except asyncio.CancelledError:
            raise
        except BaseException as err:  # noqa: BLE001 - a bad frame, a silent client: after the earlier answers
            conn.fail(err)

    async def _answer(self, ctx: Context, frame: bytes, reader: asyncio.StreamReader,
                      conn: "_Pipeline | None" = None) -> bytes | None:
        api_key, version, correlation_id = codec.head(frame)
        if not ctx.session.may_serve(api_key):
            raise CloseConnection(f"api key {api_key} before SASL authentication (--verify-signatures)")
        if api_key == codec.API_VERSIONS and not codec.advertised(api_key, version):
            # Answered, not closed: the client learns the versions served and asks again.
            return codec.encode(api_key, 0, correlation_id, versions.unsupported_version())
        request = codec.decode(frame)  # Malformed: the connection closes
        handler = OPERATIONS[api_key]
        if api_key in ABANDONED_WITH_CLIENT:
            tree = await _unless_client_gone(handler(ctx, request.body), reader, conn)
        elif inspect.iscoroutinefunction(handler):
            tree = await handler(ctx, request.body)
        else:
            tree = await asyncio.get_running_loop().run_in_executor(self.pool, handler, ctx, request.body)
        if tree is None:  # nothing to answer (a Produce with acks=0)
            return None
        return codec.encode(api_key, version, correlation_id, tree)


async def _unless_client_gone(coroutine: Any, reader: asyncio.StreamReader, conn: "_Pipeline | None" = None) -> Any:
    """`coroutine`'s result; CloseConnection once the client has closed or reset its end (EOF seen
    with nothing left to read: a pipelined request still buffered, or read ahead and waiting its
    turn after this one, keeps it going)."""
    task = asyncio.ensure_future(coroutine)
    me = asyncio.current_task()
    try:
        while True:
            done, _ = await asyncio.wait((task,), timeout=GONE_CHECK_S)
            if done:
                return task.result()
            if (reader.at_eof() or reader.exception() is not None) and (conn is None or conn.is_last(me)):
                raise CloseConnection("the client left during a long poll")
    finally:
        if not task.done():
            task.cancel()


# Pipelining. Kafka clients send up to max.in.flight.requests.per.connection (5 by default)
# requests before the first answer and match answers by order. Frames are read ahead up to
# PIPELINE unanswered ones; each starts at once under these rules, so a connection's requests have
# the effects they would have one at a time, in order:
# - READ (no side effect a later request of the connection could see: Fetch, Metadata, ListOffsets,
#   the describes) waits for the last write before it, and overlaps other reads;
# - WRITE (Produce, commits, group membership, admin: anything else) waits for every request
#   before it, and everything after it waits for it: a connection's Produces are stored in the
#   order it sent them, one at a time;
# - BARRIER (SASL, anything before a required authentication) is a write the reader also waits
#   for before reading the next frame (it decides how that frame is read and in which scope).
# Answers are written in request order whatever order the handlers finish in.
PIPELINE = 16
READ, WRITE, BARRIER = "read", "write", "barrier"
READS = frozenset({1, 2, 3, 9, 10, 15, 16, 18, 23, 32, 60})
SASL_KEYS = frozenset({17, 36})


class _Pipeline:
    """One connection's requests in flight: their tasks in request order (the writer's queue), and
    what the next one must wait for."""

    def __init__(self) -> None:
        self.queue: collections.deque[asyncio.Future | None] = collections.deque()  # None: end of stream
        self._changed = asyncio.Event()
        self._last_write: asyncio.Future | None = None
        self._since_write: list[asyncio.Future] = []  # reads started after the last write
        self._last: asyncio.Future | None = None

    async def room(self) -> None:
        while sum(1 for job in self.queue if job is not None) >= PIPELINE:
            self._changed.clear()
            await self._changed.wait()

    def start(self, make: Callable[[], Any], kind: str) -> asyncio.Future:
        if kind == READ:
            after = [self._last_write] if self._last_write is not None else []
        else:
            after = ([self._last_write] if self._last_write is not None else []) + self._since_write
        job = asyncio.ensure_future(_after(after, make))
        if kind == READ:
            # Those done well need no waiting for; failed ones are kept (they fail what follows).
            self._since_write = [j for j in self._since_write if not j.done() or j.cancelled() or j.exception()]
            self._since_write.append(job)
        else:
            self._last_write, self._since_write = job, []
        self._last = job
        self._push(job)
        return job

    def is_last(self, task: Any) -> bool:
        return self._last is task or self._last is None

    def end(self) -> None:
        self._push(None)

    def fail(self, err: BaseException) -> None:
        failed = asyncio.get_running_loop().create_future()
        failed.set_exception(err)
        self._push(failed)

    def _push(self, job: asyncio.Future | None) -> None:
        self.queue.append(job)
        self._changed.set()

    async def next(self) -> asyncio.Future | None:
        while not self.queue:
            self._changed.clear()
            await self._changed.wait()
        return self.queue[0]

    def done(self) -> None:
        self.queue.popleft()
        self._changed.set()

    def drop(self) -> None:
        """The connection is closing: cancel what is still running, and mark every failure seen
        (asyncio would log the ones nobody awaited)."""
        for job in self.queue:
            if job is None:
                continue
            if not job.done():
                job.cancel()
            elif not job.cancelled():
                job.exception()
        self.queue.clear()


async def _after(earlier: list[asyncio.Future], make: Callable[[], Any]) -> Any:
    """`make()`'s awaited result once every earlier request has finished; CloseConnection (and
    no effect) if one of them failed: the connection is closing and Kafka acts on none of the
    requests after a failed one."""
    for job in earlier:
        if not job.done():
            await asyncio.wait((job,))
        if job.cancelled() or job.exception() is not None:
            raise CloseConnection("an earlier request of the connection failed")
    return await make()


async def _write_answers(conn: _Pipeline, writer: asyncio.StreamWriter) -> None:
    """Each request's answer in request order (none for an acks=0 Produce); the first failure is
    raised here, after the answers before it were written."""
    while True:
        job = await conn.next()
        if job is None:
            await writer.drain()
            return
        try:
            answer = await asyncio.shield(job) if not job.done() else job.result()
        finally:
            conn.done()
        if answer is not None:
            writer.write(answer)
            if writer.transport.get_write_buffer_size() > 1 << 20 or not conn.queue:
                await writer.drain()
