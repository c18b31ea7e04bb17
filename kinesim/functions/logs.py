"""Log events in CloudWatch Logs' shape, kept as files: a log group is a directory of log streams,
a stream one file of events. Functions' logs are the groups `/aws/lambda/<name>`, one stream per
execution environment (worker); the Logs API (kinesim.logs) serves every group from the same files.

On disk, under `root_dir`:
- a function's group: `<FunctionName>/` (the layout before other groups existed, kept);
- any other group: `%<quoted group name>/` (function names never hold `%`), or `%~<sha256>/`
  with a `.name` file when the quoted name is too long for a directory name;
- a stream: `<quoted stream name>.jsonl` (or `~<sha256>.jsonl` beside a `~<sha256>.name` file),
  one JSON object per line: an event `{"timestamp": ms, "message": str, "ingestionTime": ms}`, or,
  first in a stream made by CreateLogStream before any event, `{"created": ms}`.

A stream written by a function is written by one worker at a time (in time order); PutLogEvents
batches may arrive in any order, so a read sorts. Parsed streams are cached by file size: a poll
(`aws logs tail --follow`, `kinesim logs -f`) reads only what was appended since.
"""
from __future__ import annotations

import hashlib
import heapq
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable
from urllib.parse import quote, unquote

import orjson

_SUFFIX = ".jsonl"
_FUNCTION_PREFIX = "/aws/lambda/"
_FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,140}")
_MAX_FILE_NAME = 200  # bytes, under the usual 255 with room for the suffix
_MTIME_SLACK_MS = 2000  # file times come from a coarser clock than event times (and some filesystems')

# One event as read: (timestamp ms, rank among the stream's events with that timestamp, ingestion
# ms, message). The rank stays the same when events are appended or expire (retention removes whole
# timestamps), which makes (timestamp, stream, rank) a stable position for paging tokens and ids.
Event = tuple[int, int, int, str]


@dataclass
class _Parsed:
    size: int = 0          # bytes consumed (whole lines only)
    inode: int = 0
    created: int | None = None
    events: list[Event] = field(default_factory=list)
    ranks: dict[int, int] = field(default_factory=dict)  # timestamp -> events seen with it


class FunctionLogs:
    """The log files of every group. `on_new_stream(group)` (set by the Logs service) is called
    before the first write to a stream this process has not written yet: the group exists once
    something logged to it, as on AWS."""

    def __init__(self, root_dir: str):
        self.root_dir = root_dir
        self.on_new_stream: Callable[[str], None] | None = None
        self._lock = threading.Lock()  # appends, rewrites, deletes; a read takes no lock
        self._paths: dict[tuple[str, str], str] = {}  # (group, stream) -> file, for streams written
        self._parsed: dict[str, _Parsed] = {}
        self._parse_lock = threading.Lock()

    # functions' groups

    @staticmethod
    def group_name(function_name: str) -> str:
        return f"{_FUNCTION_PREFIX}{function_name}"

    def write(self, function_name: str, stream_name: str, lines: list[str],
              timestamps: list[int] | None = None) -> None:
        """Append a function's output to one of its streams. `timestamps` (epoch ms, one per line)
        default to now."""
        if not lines:
            return
        now = int(time.time() * 1000)
        stamps = timestamps if timestamps is not None else [now] * len(lines)
        self.append(self.group_name(function_name), stream_name, list(zip(stamps, lines)), now)

    def read(self, function_name: str, since_ms: int = 0, limit: int = 10000) -> list[dict]:
        """A function's events at or after `since_ms`, oldest first, at most `limit`."""
        group = self.group_name(function_name)
        streams = [(name, self.events(group, name)) for name in self.stream_names(group, since_ms)]
        merged = heapq.merge(*([(e[0], name, e) for e in events if e[0] >= since_ms] for name, events in streams))
        out = []
        for ts, name, event in merged:
            if len(out) >= limit:
                break
            out.append({"timestamp": ts, "message": event[3], "logStreamName": name, "ingestionTime": event[2]})
        return out

    def delete(self, function_name: str) -> None:
        self.delete_group(self.group_name(function_name))

    # any group

    def append(self, group: str, stream: str, events: list[tuple[int, str]], ingestion_ms: int) -> None:
        """Append (timestamp, message) events to a stream, making its group's directory if need be."""
        data = b"".join(orjson.dumps({"timestamp": ts, "message": message, "ingestionTime": ingestion_ms}) + b"\n"
                        for ts, message in events)
        if (group, stream) not in self._paths and self.on_new_stream is not None:
            self.on_new_stream(group)
        with self._lock:
            path = self._paths.get((group, stream))
            if path is None:
                path = self._paths[group, stream] = self._create_stream_file(group, stream)
            with open(path, "ab") as f:
                f.write(data)

    def create_stream(self, group: str, stream: str, created_ms: int) -> bool:
        """Make an empty stream; False when it exists already."""
        with self._lock:
            path = self._stream_path(group, stream)
            if os.path.exists(path):
                return False
            self._create_stream_file(group, stream)
            with open(path, "ab") as f:
                f.write(orjson.dumps({"created": created_ms}) + b"\n")
            self._paths[group, stream] = path
            return True

    def stream_exists(self, group: str, stream: str) -> bool:
        return os.path.exists(self._stream_path(group, stream))

    def stream_names(self, group: str, since_ms: int = 0) -> list[str]:
        """The group's streams, by name; with `since_ms`, only those written since about then."""
        directory = self._group_dir(group)
        try:
            files = [n for n in os.listdir(directory) if n.endswith(_SUFFIX)]
        except FileNotFoundError:
            return []
        names = []
        for file in files:
            path = os.path.join(directory, file)
            try:
                if since_ms and os.stat(path).st_mtime * 1000 < since_ms - _MTIME_SLACK_MS:
                    continue
                names.append(_decoded(directory, file[:-len(_SUFFIX)]))
            except FileNotFoundError:  # deleted since listdir
                continue
        return sorted(names)

    def group_dirs(self) -> list[str]:
        """The groups that have a directory (their streams' files), by name."""
        try:
            entries = os.listdir(self.root_dir)
        except FileNotFoundError:
            return []
        groups = []
        for entry in entries:
            if not os.path.isdir(os.path.join(self.root_dir, entry)):
                continue
            if not entry.startswith("%"):
                groups.append(self.group_name(unquote(entry)))
                continue
            try:
                groups.append(_decoded(self.root_dir, entry) if entry.startswith("%~") else unquote(entry[1:]))
            except FileNotFoundError:
                continue
        return groups

    def stored_bytes(self, group: str) -> int:
        directory = self._group_dir(group)
        try:
            return sum(e.stat().st_size for e in os.scandir(directory) if e.name.endswith(_SUFFIX))
        except FileNotFoundError:
            return 0

    def events(self, group: str, stream: str) -> list[Event]:
        """The stream's events in (timestamp, rank) order. The list is shared: do not change it."""
        return self._parse(self._stream_path(group, stream)).events

    def created(self, group: str, stream: str) -> int | None:
        """When CreateLogStream made the stream (None for a stream made by its first event)."""
        return self._parse(self._stream_path(group, stream)).created

    def delete_stream(self, group: str, stream: str) -> bool:
        path = self._stream_path(group, stream)
        with self._lock:
            self._paths.pop((group, stream), None)
            self._forget(path)
            try:
                os.remove(path)
            except FileNotFoundError:
                return False
            if path.endswith(_SUFFIX) and os.path.basename(path).startswith("~"):
                _remove_quietly(path[:-len(_SUFFIX)] + ".name")
            return True

    def delete_group(self, group: str) -> None:
        directory = self._group_dir(group)
        with self._lock:
            self._paths = {k: v for k, v in self._paths.items() if k[0] != group}
            with self._parse_lock:
                self._parsed = {p: v for p, v in self._parsed.items() if not p.startswith(directory + os.sep)}
            shutil.rmtree(directory, ignore_errors=True)

    def expire(self, group: str, before_ms: int) -> int:
        """Delete the group's events with a timestamp before `before_ms` (retention); how many."""
        removed = 0
        for stream in self.stream_names(group):
            path = self._stream_path(group, stream)
            events = self._parse(path).events
            if not events or events[0][0] >= before_ms:  # sorted: nothing has expired
                continue
            with self._lock:
                removed += self._rewrite_without(path, before_ms)
        return removed

    @staticmethod
    def merged(streams: Iterable[tuple[str, list[Event]]]) -> Iterable[tuple[int, str, int, int, str]]:
        """Several streams' events interleaved in (timestamp, stream, rank) order, as
        (timestamp, stream, rank, ingestion, message)."""
        return heapq.merge(*(_keyed(name, events) for name, events in streams))

    # files

    def _group_dir(self, group: str) -> str:
        if group.startswith(_FUNCTION_PREFIX) and _FUNCTION_NAME.fullmatch(group[len(_FUNCTION_PREFIX):]):
            return os.path.join(self.root_dir, group[len(_FUNCTION_PREFIX):])
        return os.path.join(self.root_dir, "%" + _encoded(group))

    def _stream_path(self, group: str, stream: str) -> str:
        return os.path.join(self._group_dir(group), _encoded(stream) + _SUFFIX)

    def _create_stream_file(self, group: str, stream: str) -> str:
        """The stream's path, its directory made and long names recorded (call with the lock held)."""
        directory = self._group_dir(group)
        os.makedirs(directory, exist_ok=True)
        if os.path.basename(directory).startswith("%~"):
            _write_name(directory, group)
        file = _encoded(stream)
        if file.startswith("~"):
            _write_name(os.path.join(directory, file), stream)
        return os.path.join(directory, file + _SUFFIX)

    def _forget(self, path: str) -> None:
        with self._parse_lock:
            self._parsed.pop(path, None)

    def _parse(self, path: str) -> _Parsed:
        """The file's events, reading only what was appended since the last call."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return _Parsed()
        with self._parse_lock:
            parsed = self._parsed.get(path)
            if parsed is None or parsed.inode != st.st_ino or st.st_size < parsed.size:
                parsed = _Parsed(inode=st.st_ino)
            if st.st_size > parsed.size:
                parsed = self._read_more(path, parsed)
            self._parsed[path] = parsed
            return parsed

    @staticmethod
    def _read_more(path: str, parsed: _Parsed) -> _Parsed:
        try:
            with open(path, "rb") as f:
                f.seek(parsed.size)
                data = f.read()
        except FileNotFoundError:
            return parsed
        end = data.rfind(b"\n") + 1  # a line without its newline is an append still in progress
        fresh: list[Event] = []
        ranks = dict(parsed.ranks)
        created = parsed.created
        for line in data[:end].splitlines():
            doc = orjson.loads(line)
            if "message" not in doc:
                created = doc.get("created", created)
                continue
            ts = doc["timestamp"]
            rank = ranks.get(ts, 0)
            ranks[ts] = rank + 1
            fresh.append((ts, rank, doc["ingestionTime"], doc["message"]))
        events = parsed.events
        if fresh:
            # A new list: readers may hold the old one.
            events = events + fresh
            if parsed.events and fresh[0] < parsed.events[-1] or any(a > b for a, b in zip(fresh, fresh[1:])):
                events.sort()
        return _Parsed(size=parsed.size + end, inode=parsed.inode, created=created, events=events, ranks=ranks)

    def _rewrite_without(self, path: str, before_ms: int) -> int:
        """Rewrite a stream's file keeping events at or after `before_ms` (call with the lock held)."""
        try:
            with open(path, "rb") as f:
                lines = f.read().splitlines(keepends=True)
        except FileNotFoundError:
            return 0
        kept = [line for line in lines
                if not line.endswith(b"\n") or orjson.loads(line).get("timestamp", before_ms) >= before_ms]
        if len(kept) == len(lines):
            return 0
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.writelines(kept)
        os.replace(tmp, path)
        self._forget(path)
        return len(lines) - len(kept)


def _encoded(name: str) -> str:
    file = quote(name, safe="")
    if file.startswith("~"):  # a leading ~ marks a hashed name
        file = "%7E" + file[1:]
    if len(file.encode()) <= _MAX_FILE_NAME:
        return file
    return "~" + hashlib.sha256(name.encode()).hexdigest()


def _decoded(directory: str, file: str) -> str:
    """The name a file or directory stands for (hashed ones have theirs in a `.name` file)."""
    if file.startswith(("~", "%~")):
        with open(os.path.join(directory, file + ".name"), encoding="utf-8") as f:
            return f.read()
    return unquote(file)


def _write_name(base: str, name: str) -> None:
    if not os.path.exists(base + ".name"):
        with open(base + ".name", "w", encoding="utf-8") as f:
            f.write(name)


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _keyed(name: str, events: list[Event]) -> Iterable[tuple[int, str, int, int, str]]:
    for ts, rank, ingestion, message in events:
        yield ts, name, rank, ingestion, message
