"""Fuzzed requests for kinesim's services, generated from botocore's service models.

For every operation of Kinesis and Firehose (JSON 1.1; Kinesis also CBOR 1.1), SQS, CloudWatch
Logs, SSM and ECR (JSON), Lambda (REST-JSON), S3 (REST-XML, path style), SNS, CloudFormation,
STS and IAM (query), `Fuzzer` makes a valid-ish request and breaks it: each required member missing,
members of the wrong type or out of range (huge and special numbers, deep nesting, long and
non-ASCII text, invalid base64, bad timestamps), values inside structures and lists replaced the
same way, garbage bodies, wrong content types and odd envelopes (query strings, headers, methods,
targets, credentials). Text that a service parses further gets what breaks that parser: JSON
documents in string members (policies, filter policies, event patterns, json messages, session
policies, ECR's policies) nested 3,000 deep, huge or malformed; filter patterns that backtrack; JQ
queries without end; CloudFormation templates that bomb (in TemplateBody, and at a TemplateURL);
AllowedPattern expressions with the value that makes them backtrack; query-protocol form keys with
thousands of dots (`document_cases`, `form_cases`). A server must answer each with a 2xx or 4xx,
never a crash, and refuse what AWS refuses on the request (tests/fuzz_wire.py `is_failure`).

Names are filled from pools of real resources (`create_resources`) so that fuzzed requests
reach past "not found". Chance comes only from the `random.Random` handed in: a seed gives the
same requests. Used by tests/test_fuzz.py (a sweep of every operation) and bench/fuzz.py (a long
random run).
"""
from __future__ import annotations

import copy
import dataclasses
import io
import random
import re
import subprocess
import sys
import time
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import AbstractSet, Any, Callable, Iterator
from urllib.parse import quote

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError

import fuzz_values as v
from fuzz_wire import (CONTENT_TYPES, DATE, Operation, Outcome, Request, authorization, header_name, header_value,
                       text_of)
from kinesim.config import Settings
from kinesim.server import ServerProcess, wait_ready

SERVICES = ("kinesis", "firehose", "lambda", "s3", "sns", "sqs", "logs", "cloudformation", "sts", "ssm", "ecr", "iam")
HANDLER = "def handler(event, context):\n    return event\n"
# The fuzzed server's limits. A nested stack that creates itself grows until the account's stack
# quota: a small one ends such a chain in a few stacks (AWS's 2,000 would be minutes of deploys beside
# the fuzzing), above the twenty or so a sweep creates otherwise. Its address space about six times
# what a sweep takes (700 MB): a bomb that expands meets MemoryError in the server, not the
# machine's OOM killer (which may pick any process).
STACK_LIMIT = 40
MEMORY_LIMIT = 4 << 30
ROLE = "arn:aws:iam::000000000000:role/fuzz"
_DESTRUCTIVE = ("Abort", "Delete", "Deregister", "Remove")


class Fuzzer:
    """Request generators for every operation of `services`, filling names from `pools`: sets of
    real resources that belong together (member name -> the values naming them, e.g. a stream's
    name and ARN), one set per request so that its names agree. A name `service:member` is that
    service's only (SSM's `Name` is a parameter's, SNS's a topic's): see `names_for`."""

    def __init__(self, pools: list[dict[str, list[Any]]] | None = None, services: tuple[str, ...] = SERVICES):
        session = botocore.session.get_session()
        self.pools = pools or [{}]
        # Members whose real values differ from pool to pool.
        self.varying = {k for k in self.pools[0] if any(p.get(k) != self.pools[0][k] for p in self.pools)}
        self.operations: dict[str, list[Operation]] = {}
        for service in services:
            model = session.get_service_model(service)
            # Deletions last, so that the rest of a sweep meets the real resources.
            names = sorted(model.operation_names, key=lambda n: (n.startswith(_DESTRUCTIVE), n))
            kind = QueryOperation if model.metadata["protocol"] == "query" else Operation
            self.operations[service] = [kind(service, model, name) for name in names]
        self.documents = {(op.service, op.name): _document_slots(op.input) if op.input is not None else []
                          for ops in self.operations.values() for op in ops}

    # values

    def valid(self, shape: Any, name: str, rng: random.Random, names: dict[str, list[Any]], rich: bool = False,
              real: float = 0.85, depth: int = 0) -> Any:
        """A plausible value: a real resource's name when the pool has one (with odds `real`:
        else a made-up name, which creates what does not exist yet), else within the model's
        enum and min/max (patterns are not honoured: the server's checks get exercised).
        `rich`: optional members too, about half of them, three levels deep."""
        if name in names and rng.random() < real:
            return rng.choice(names[name])
        kind, meta = shape.type_name, shape.metadata
        if kind == "structure":
            return {m: self.valid(s, m, rng, names, rich, real, depth + 1) for m, s in shape.members.items()
                    if m in shape.required_members or (rich and depth < 3 and rng.random() < 0.5)}
        if kind == "list":
            return [self.valid(shape.member, name, rng, names, rich, real, depth + 1)
                    for _ in range(max(1, meta.get("min", 1)))]
        if kind == "map":
            key = str(self.valid(shape.key, "key", rng, {}))
            return {key: self.valid(shape.value, name, rng, names, rich, real, depth + 1)}
        if kind == "string":
            if shape.enum:
                return rng.choice(shape.enum)
            low, high = meta.get("min", 1), meta.get("max", 64)
            return f"fuzz{rng.randrange(10 ** 6)}".ljust(low, "0")[:max(high, 1)]
        if kind in ("integer", "long"):
            low = max(int(meta.get("min", 1)), 1)
            return rng.randint(low, max(low, min(int(meta.get("max", 10)), 10)))
        if kind in ("float", "double"):
            return 1.5
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "blob":
            return b"fuzz"
        if kind == "timestamp":
            return datetime(2026, 1, 1, tzinfo=timezone.utc)
        return None

    def base(self, op: Operation, rng: random.Random, rich: bool = False, real: float = 1.0,
             names: dict[str, list[Any]] | None = None) -> dict[str, Any]:
        """A valid-ish input: the required members, and (mostly) the optional ones that name a
        real resource, since without them most operations stop at "which stream?". Names are
        real ones (`real`: the odds) so that a wrong value meets an existing resource; from
        `names`, else from a pool picked at random."""
        if op.input is None:
            return {}
        names = self.names_for(op, names or rng.choice(self.pools))
        params = self.valid(op.input, "", rng, names, rich, real)
        for member in self.pooled(op):
            if member not in params and rng.random() < 0.85:
                params[member] = rng.choice(names[member])
        return params

    @staticmethod
    def names_for(op: Operation, names: dict[str, list[Any]]) -> dict[str, list[Any]]:
        """A pool's names as `op` sees them: its service's own (`ssm:Name`) over the shared ones."""
        prefix = op.service + ":"
        own = {key[len(prefix):]: values for key, values in names.items() if key.startswith(prefix)}
        return {**names, **own} if own else names

    def pooled(self, op: Operation) -> list[str]:
        names = self.names_for(op, self.pools[0])
        return [m for m in op.members if m in names and m not in op.required]

    def hostile(self, shape: Any, where: str, rng: random.Random, every: bool = False, member: Any = "") -> list[Any]:
        """Wrong values for a `member` of `shape` written `where` ("json", "cbor", "xml" or
        "text"): one pick, or `every` value meant for its type (and member) plus a few meant
        for any."""
        if where in ("text", "xml"):
            typed, anything = v.TEXT_BY_TYPE.get(shape.type_name, []), v.TEXT if where == "text" else v.XML_TEXT
            extra = 4 if typed else 6
        else:
            by_type, anything = (v.CBOR_BY_TYPE, v.CBOR_ANY) if where == "cbor" else (v.JSON_BY_TYPE, v.JSON_ANY)
            typed, extra = by_type.get(shape.type_name, anything), 2
            if shape.type_name == "list":  # far past any list's maximum length
                typed = typed + [[self.valid(shape.member, "", rng, {})] * 10_001]
        typed = typed + v.BY_MEMBER.get(member, [])
        if every:
            return typed + rng.sample(anything, extra)
        return [rng.choice(typed if typed and rng.random() < 0.7 else anything)]

    # cases: each returns one request (or, with `every`, all of its kind for one operation)

    @staticmethod
    def formats(op: Operation) -> list[str]:
        """The body formats an operation takes: Kinesis also CBOR (the Java SDKs' default)."""
        return ["json", "cbor"] if op.service == "kinesis" else [op.body_format()]

    def valid_case(self, op: Operation, rng: random.Random, fmt: str | None = None) -> Request:
        fmt = fmt or rng.choice(self.formats(op))
        return op.request(self.base(op, rng, real=0.85), f"valid/{fmt}", fmt)

    def missing_case(self, op: Operation, rng: random.Random, member: str | None = None,
                     fmt: str | None = None) -> Request:
        fmt = fmt or rng.choice(self.formats(op))
        candidates = op.required + self.pooled(op)
        member = member or (rng.choice(candidates) if candidates else None)
        params = self.base(op, rng, real=0.85)
        params.pop(member, None)
        return op.request(params, f"missing {member}/{fmt}", fmt)

    def hostile_cases(self, op: Operation, rng: random.Random, member: str | None = None,
                      fmt: str | None = None, every: bool = False) -> list[Request]:
        fmt = fmt or rng.choice(self.formats(op))
        member = member or (rng.choice(list(op.members)) if op.members else None)
        if member is None:  # an operation without input: a member it does not have
            values, member = v.JSON_ANY if fmt == "json" else v.CBOR_ANY, "NoSuchMember"
            return [op.request({**self.base(op, rng), member: rng.choice(values)}, f"extra member/{fmt}", fmt)]
        where = "cbor" if fmt == "cbor" else op.body_format(member)
        # Every value against each pool's resources when they differ for this operation (a
        # provisioned and an on-demand stream): some checks are only made for one kind.
        pools = self.pools if every and set(op.members) & self.varying else [None]
        return [op.request({**self.base(op, rng, names=names), member: value}, f"wrong {member}/{fmt}", fmt)
                for value in self.hostile(op.members[member], where, rng, every, member) for names in pools]

    def nested_cases(self, op: Operation, rng: random.Random, fmt: str | None = None,
                     every: bool = False) -> list[Request]:
        """A valid input with optional members, one value inside it replaced: at one random
        place, or (`every`) at each place, with every wrong value for scalars and members of
        their own (`BY_MEMBER`), two for others."""
        fmt = fmt or rng.choice(self.formats(op))
        params = self.base(op, rng, rich=True)
        slots = _inner_slots(op, params)
        if not slots:
            return self.hostile_cases(op, rng, fmt=fmt)
        where = "cbor" if fmt == "cbor" else op.body_format()
        out = []
        for index in range(len(slots)) if every else [rng.randrange(len(slots))]:
            _, key, shape = slots[index]
            all_values = shape.type_name in v.SCALARS or key in v.BY_MEMBER
            values = self.hostile(shape, where, rng, every and all_values, key) + (
                self.hostile(shape, where, rng, member=key) if every and not all_values else [])
            for value in values:
                changed = copy.deepcopy(params)
                container, key, _ = _inner_slots(op, changed)[index]
                container[key] = value
                out.append(op.request(changed, f"nested {shape.name}/{fmt}", fmt))
        return out

    def garbage_cases(self, op: Operation, rng: random.Random, fmt: str | None = None,
                      every: bool = False) -> list[Request]:
        """The request's body replaced: random bytes, cut short, or garbage for its format."""
        fmt = fmt or rng.choice(self.formats(op))
        valid = op.request(self.base(op, rng), "", fmt)
        bodies = [(rng.randbytes(rng.randint(1, 4096)), "random bytes"),
                  (valid.body[:rng.randrange(len(valid.body) or 1)], "truncated")]
        bodies += [(b, f"garbage {b[:24]!r}") for b in v.GARBAGE.get(fmt, QUERY_GARBAGE) + v.GARBAGE_ANY]
        out = []
        for body, what in bodies if every else [rng.choice(bodies)]:
            req = dataclasses.replace(valid, body=body, case=f"{what}/{fmt}", headers=dict(valid.headers))
            req.headers.setdefault("Content-Type", CONTENT_TYPES.get(op.protocol, FORM_TYPE))
            out.append(req)
        return out

    def content_type_cases(self, op: Operation, rng: random.Random, every: bool = False) -> list[Request]:
        valid = op.request(self.base(op, rng), "", "json")
        out = []
        wrong = v.WRONG_TYPES.get(op.protocol, QUERY_WRONG_TYPES)
        for ctype in wrong if every else [rng.choice(wrong)]:
            headers = {k: h for k, h in valid.headers.items() if k != "Content-Type"}
            if ctype is not None:
                headers["Content-Type"] = ctype
            out.append(dataclasses.replace(valid, headers=headers, case=f"content type {ctype!r}"))
        return out

    def odd_cases(self, op: Operation, rng: random.Random, every: bool = False) -> list[Request]:
        """The envelope rather than the input: methods, query strings (odd sub-resources,
        presigned-URL parameters), headers (another operation's target, broken credentials,
        foreign origins, odd ranges and checksums)."""
        valid = op.request(self.base(op, rng), "", "json")
        table = v.ODD.get(op.service if op.protocol != "json" else "json", v.ODD["json"])
        out = []
        for method, query, headers in table if every else [rng.choice(table)]:
            req = dataclasses.replace(valid, method=method or valid.method, headers=dict(valid.headers),
                                      case=f"odd {method or valid.method} query={query!r} headers={headers!r}"[:200])
            if query:
                req.path += ("&" if "?" in req.path else "?") + query
            for name, value in headers.items():
                if value is None:
                    req.headers.pop(name, None)
                else:
                    req.headers[header_name(name)] = header_value(value)
            out.append(req)
        return out

    def document_cases(self, op: Operation, rng: random.Random, fmt: str | None = None,
                       every: bool = False) -> list[Request]:
        """A valid input with one document (`fuzz_values.DOCUMENT_MEMBERS` and friends) replaced by
        one that breaks its parser: at one random place with one value, or (`every`) each value at
        each place. The structures around it are made valid enough to reach the parser
        (`DOCUMENT_CONTEXT`). Operations without documents: `hostile_cases`."""
        slots = self.documents[op.service, op.name]
        if not slots:
            return self.hostile_cases(op, rng, fmt=fmt)
        fmt = fmt or rng.choice(self.formats(op))
        if every:
            # Every value at the first slot of each kind; one at its repeats (Firehose's eight
            # kinds of destination, each with processors, reach the same parser).
            chosen, kinds = [], set()
            for slot in slots:
                kind = (slot.path[-1], repr(sorted(slot.beside.items(), key=lambda item: item[0])))
                chosen += [(slot, value) for value in slot.values] if kind not in kinds else [
                    (slot, rng.choice(slot.values))]
                kinds.add(kind)
        else:
            slot = rng.choice(slots)
            chosen = [(slot, rng.choice(slot.values))]
        out = []
        for slot, value in chosen:
            names = self.names_for(op, {**rng.choice(self.pools), **v.DOCUMENT_CONTEXT})
            # A create operation gets made-up names half the time: it then makes something new.
            real = 0.5 if op.name.startswith("Create") else 1.0
            params = copy.deepcopy(self.base(op, rng, real=real, names=names))
            for member in v.DOCUMENT_ALONE.get(op.name, ()):
                params.pop(member, None)
            self._place(op, params, slot, value, rng, names)
            # What AWS refuses on the request itself must not be accepted (fuzz_wire.is_failure).
            refused = isinstance(value, v.Refused) and (value.by is None or op.name in value.by)
            case = f"document {'.'.join(map(str, slot.path))}{' (AWS refuses)' if refused else ''}/{fmt}"
            out.append(dataclasses.replace(op.request(params, case, fmt), refused=refused))
        return out

    def _place(self, op: Operation, params: dict[str, Any], slot: "DocumentSlot", value: str,
               rng: random.Random, names: dict[str, list[Any]]) -> None:
        """Put `value` at `slot.path` in `params`, making the structures and lists on the way, with
        the members `names` has for them (a destination's partitioning around its query)."""
        container, shape = params, op.input
        for step in slot.path[:-1]:
            if shape.type_name == "list":
                shape = shape.member
                if not container:
                    container.append(copy.deepcopy(self.valid(shape, "", rng, names, real=1.0)))
                # The item already holding the pair's selector (a processor's query parameter), if any.
                step = next((i for i, item in enumerate(container)
                             if isinstance(item, dict) and slot.beside.items() <= item.items()), 0)
            else:
                shape = shape.members[step]
                if not isinstance(container.get(step), (dict, list)):
                    container[step] = copy.deepcopy(self.valid(shape, step, rng, names, real=1.0))
                if shape.type_name == "structure":
                    for member in shape.members:
                        if member in names and member not in container[step]:
                            container[step][member] = copy.deepcopy(rng.choice(names[member]))
            container = container[step]
        container.update(slot.beside)
        for member in [m for m, given in slot.beside.items() if given is v.ABSENT]:
            del container[member]
        container[slot.path[-1]] = value.encode("utf-8", "surrogatepass") if slot.blob else value

    def form_cases(self, op: Operation, rng: random.Random, every: bool = False) -> list[Request]:
        """A valid query-protocol (SNS) request with form keys of thousands of dots added
        (`fuzz_values.FORM_KEYS`). Other protocols: `garbage_cases`."""
        if not isinstance(op, QueryOperation):
            return self.garbage_cases(op, rng, every=every)
        valid = op.request(self.base(op, rng), "", "text")
        return [dataclasses.replace(valid, body=valid.body + b"&" + extra.encode(), headers=dict(valid.headers),
                                    case=f"form keys {extra[:40]!r}")
                for extra in (v.FORM_KEYS if every else [rng.choice(v.FORM_KEYS)])]

    # runs

    def sweep(self, op: Operation, rng: random.Random, every: bool = True) -> Iterator[Request]:
        """One operation's coverage, in each of its body formats: valid, each required (or
        resource-naming) member missing, each member wrong, values inside wrong, garbage bodies;
        then wrong content types and odd envelopes. `every`: all of the catalogue's values for
        each (else one pick per member and kind: for operations kinesim answers 501)."""
        for fmt in self.formats(op):
            yield self.valid_case(op, rng, fmt)
            for member in op.required + self.pooled(op):
                yield self.missing_case(op, rng, member, fmt)
            for member in op.members or [None]:
                yield from self.hostile_cases(op, rng, member, fmt, every)
            yield from self.nested_cases(op, rng, fmt, every)
            yield from self.garbage_cases(op, rng, fmt, every)
            if self.documents[op.service, op.name]:
                yield from self.document_cases(op, rng, fmt, every)
        if isinstance(op, QueryOperation):
            yield from self.form_cases(op, rng, every)
        yield from self.content_type_cases(op, rng, every)
        yield from self.odd_cases(op, rng, every)

    def sweep_all(self, rng: random.Random, send: Callable[[Request], Outcome]) -> None:
        """Every operation's `sweep`, through `send`: all of the catalogue's values for what
        kinesim implements; one per member and kind for an operation it answers 501 (not
        implemented), whose requests are routed and parsed and nothing more."""
        for ops in self.operations.values():
            for op in ops:
                implemented = send(self.valid_case(op, rng)).status != 501
                for req in self.sweep(op, rng, every=implemented):
                    send(req)

    CASES = (("valid_case", 10), ("missing_case", 10), ("hostile_cases", 35), ("nested_cases", 20),
             ("garbage_cases", 15), ("content_type_cases", 5), ("odd_cases", 5), ("document_cases", 10),
             ("form_cases", 3))

    def random_request(self, rng: random.Random, rare: AbstractSet[tuple[str, str]] = frozenset()) -> Request:
        """One request of a long run: a service, one of its operations, a kind of case, a value.
        Operations in `rare` ((service, name): those answered 501, not implemented) are drawn
        a tenth as often: little happens to their requests past routing and parsing."""
        ops = self.operations[rng.choice(list(self.operations))]
        weights = [0.1 if (o.service, o.name) in rare else 1.0 for o in ops]
        op = rng.choices(ops, weights)[0] if rare else rng.choice(ops)
        names, weights = zip(*self.CASES)
        made = getattr(self, rng.choices(names, weights)[0])(op, rng)
        return made if isinstance(made, Request) else made[0]


# SNS's query protocol: the input flattened into a form as botocore's QuerySerializer writes it
# (`Name.member.N`, `Name.entry.N.key`), every value as text.
FORM_TYPE = "application/x-www-form-urlencoded; charset=utf-8"
QUERY_GARBAGE = [b"=", b"&&&", b"Action", b"Action=%zz", b"Action=Publish&Action=ListTopics",
                 b"a=" + b"%ff" * 5000, b"Action=ListTopics&" + b"x.member.1=1&" * 20000]
QUERY_WRONG_TYPES = ["text/plain", None, "application/json", "application/x-amz-json-1.1",
                     "multipart/form-data; boundary=x"]


class QueryOperation(Operation):
    def body_format(self, member: str | None = None) -> str:
        return "text"

    def request(self, params: dict[str, Any], case: str, fmt: str = "text") -> Request:
        pairs: list[tuple[str, Any]] = [("Action", self.name), ("Version", self.model.metadata["apiVersion"])]
        _flatten(self.input, params, "", pairs)
        body = "&".join(f"{quote(k, safe='.')}={_form_value(val)}" for k, val in pairs)
        headers = {"X-Amz-Date": DATE, "Authorization": authorization(self.service), "Content-Type": FORM_TYPE}
        return Request(self.service, self.name, case, "POST", "/", headers, body.encode("utf-8", "surrogatepass"))


def _form_value(value: Any) -> str:
    if isinstance(value, v.Raw):
        return str(value.value)
    if value is v.HUGE_INT:  # str() refuses past 4,300 digits: its text, written out
        return "1" + "0" * 5000
    return quote(text_of(value).encode("utf-8", "surrogatepass"), safe="")


def _flatten(shape: Any, value: Any, prefix: str, pairs: list[tuple[str, Any]]) -> None:
    """Values that do not fit their shape (the fuzzer's wrong types) go out as text where they are."""
    kind = shape.type_name if shape is not None else None
    if kind == "structure" and isinstance(value, dict):
        for name, item in value.items():
            member = shape.members.get(name)
            wire = member.serialization.get("name", name) if member is not None else str(name)
            _flatten(member, item, f"{prefix}.{wire}" if prefix else wire, pairs)
    elif kind == "list" and isinstance(value, list):
        item_name = shape.member.serialization.get("name", "member")
        base = prefix if shape.serialization.get("flattened") else f"{prefix}.{item_name}"
        for i, item in enumerate(value, 1):
            _flatten(shape.member, item, f"{base}.{i}", pairs)
    elif kind == "map" and isinstance(value, dict):
        key_name = shape.key.serialization.get("name", "key")
        value_name = shape.value.serialization.get("name", "value")
        for i, (k, item) in enumerate(value.items(), 1):
            pairs.append((f"{prefix}.entry.{i}.{key_name}", k))
            _flatten(shape.value, item, f"{prefix}.entry.{i}.{value_name}", pairs)
    elif value is not None and prefix:
        pairs.append((prefix, value))


def _inner_slots(op: Operation, params: dict[str, Any]) -> list[tuple[Any, Any, Any]]:
    """Every (container, key, shape) inside an input's members, in a stable order (top-level
    members are hostile_cases' business)."""
    out: list[tuple[Any, Any, Any]] = []

    def walk(shape: Any, value: Any) -> None:
        if shape.type_name == "structure" and isinstance(value, dict):
            items = [(k, shape.members[k]) for k in value if k in shape.members]
        elif shape.type_name == "list" and isinstance(value, list):
            items = [(i, shape.member) for i in range(len(value))]
        elif shape.type_name == "map" and isinstance(value, dict):
            items = [(k, shape.value) for k in value]
        else:
            return
        for key, item_shape in items:
            if value is not params:
                out.append((value, key, item_shape))
            walk(item_shape, value[key])

    if op.input is not None:
        walk(op.input, params)
    return out


@dataclasses.dataclass(frozen=True)
class DocumentSlot:
    """A place in an operation's input that holds a document (or a pattern, a JQ query)."""
    path: tuple[str | int, ...]     # member names, 0 for a list's item, an attribute map's key last
    values: list[str]               # what breaks its parser
    blob: bool = False              # sent as bytes (record data, a payload)
    # set next to it: the pair's selector, or what its reader needs (v.ABSENT: left out)
    beside: dict[str, Any] = dataclasses.field(default_factory=dict)


def _document_slots(shape: Any, path: tuple[str | int, ...] = (), seen: frozenset[str] = frozenset()
                    ) -> list[DocumentSlot]:
    """The document slots below `shape`, by the member names of fuzz_values' tables."""
    if shape.type_name == "list":
        return _document_slots(shape.member, path + (0,), seen)
    if shape.type_name != "structure" or shape.name in seen:  # recursive shapes: once
        return []
    out = []
    for name, member in shape.members.items():
        here = path + (name,)
        text = member.type_name in ("string", "blob")
        if text and (name in v.DOCUMENT_MEMBERS or name in v.MEMBER_COMPANIONS):
            if name in v.DOCUMENT_MEMBERS:
                limit = member.metadata.get("max")
                # As deep as the member's maximum length allows, besides the 3,000 levels it refuses.
                fitted = v.deep_documents(limit=limit) if limit and limit < 2 * v.DOC_DEPTH else []
                out.append(DocumentSlot(here, v.DOCUMENT_MEMBERS[name] + fitted, member.type_name == "blob"))
            out += [DocumentSlot(here, values, beside=beside) for values, beside in v.MEMBER_COMPANIONS.get(name, [])]
        elif v.DOCUMENT_PAIRS.get(shape.name, ("",))[0] == name:
            _, by_selector, target = v.DOCUMENT_PAIRS[shape.name]
            out += [DocumentSlot(path + (target,), values, beside={name: selector})
                    for selector, values in by_selector.items()]
        elif name == "Attributes" and member.type_name == "map":
            out += [DocumentSlot(here + (key,), values, beside=beside)
                    for key, values in v.DOCUMENT_ATTRIBUTES.items() if not member.key.enum or key in member.key.enum
                    for beside in v.ATTRIBUTE_COMPANIONS.get(key, [{}])]
        else:
            out += _document_slots(member, here, seen | {shape.name})
    return out


# ---------------------------------------------------------------------------------------------
# the server under fuzz

TRACEBACK = re.compile(r"Traceback \(most recent call last\):\n(?:[ \t].*\n|\n)*?(\S[^\n]*)", re.MULTILINE)


# Runs a command under an address-space limit (set before exec: a preexec_fn is unsafe in a
# process with threads, as a test runner may be).
_LIMITED = "import os, resource, sys; n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_AS, (n, n)); " \
           "os.execv(sys.argv[2], sys.argv[2:])"


class LoggedServer(ServerProcess):
    """`kinesim serve` with its output in a file, so that a 5xx's traceback can be read after it.
    `memory_limit` (bytes of address space): a request that would take the machine's memory (a
    template bomb expanded) meets MemoryError in the server instead of the kernel's OOM killer,
    which may pick any process of the machine."""

    def __init__(self, settings: Settings, log_path: Path, memory_limit: int | None = None):
        super().__init__(settings)
        self.log_path = log_path
        self.memory_limit = memory_limit

    def start(self, timeout: float = 60.0) -> "LoggedServer":
        command = self.command()
        if self.memory_limit is not None:
            command = [sys.executable, "-c", _LIMITED, str(self.memory_limit), *command]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_ready(self.url, timeout, self.proc)
        return self


class LogReader:
    """What the server logged since the last look."""

    def __init__(self, path: Path | None):
        self.path, self.offset = path, 0

    def new_text(self) -> str:
        if self.path is None:
            return ""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        return data.decode("utf-8", "replace")


# ---------------------------------------------------------------------------------------------
# real resources for fuzzed names to hit


def function_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("app.py", date_time=(2020, 1, 1, 0, 0, 0)), HANDLER)
    return buf.getvalue()


def client(url: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}))


def _quietly(call: Any, **kwargs: Any) -> dict[str, Any]:
    """A call whose "already exists" answer is as good as success (re-creating after a sweep)."""
    try:
        return call(**kwargs)
    except ClientError:
        return {}


def _stream_names(kinesis: Any, stream: str, consumer: str, **mode: Any) -> dict[str, list[Any]]:
    """A stream with a consumer and a record, created unless it exists; the names naming them."""
    _quietly(kinesis.create_stream, StreamName=stream, **mode)
    kinesis.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.2, "MaxAttempts": 150})
    arn = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    _quietly(kinesis.register_stream_consumer, StreamARN=arn, ConsumerName=consumer)
    consumer_arn = kinesis.describe_stream_consumer(StreamARN=arn, ConsumerName=consumer)[
        "ConsumerDescription"]["ConsumerARN"]
    put = kinesis.put_record(StreamName=stream, Data=b"fuzz", PartitionKey="pk")
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=put["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    return {
        "StreamName": [stream], "StreamARN": [arn], "ResourceARN": [arn, consumer_arn], "ConsumerARN": [consumer_arn],
        "ConsumerName": [consumer], "ShardId": [put["ShardId"], "shardId-000000000001"], "ShardIterator": [iterator],
        "StartingSequenceNumber": [put["SequenceNumber"]], "ExclusiveStartShardId": [put["ShardId"]],
        "PartitionKey": ["pk"], "ExplicitHashKey": ["0"], "KinesisStreamARN": [arn], "EventSourceArn": [arn],
    }


def _channel_names(kinesis: Any, name: str, stream_arn: str, bucket: str) -> dict[str, list[Any]]:
    """A Kinesis channel from the on-demand stream into the bucket, created unless it exists."""
    _quietly(kinesis.create_channel, ChannelName=name, ServiceExecutionRoleARN=ROLE, StreamConfigurationList=[
        {"StreamARN": stream_arn, "RecordConfiguration": {"RecordFormatType": "JSON"}}],
        S3DestinationConfiguration={"StorageConfiguration": {
            "BucketARN": f"arn:aws:s3:::{bucket}", "ExpectedBucketOwner": "000000000000", "CompressionType": "GZIP"}})
    arn = f"arn:aws:kinesis:us-east-1:000000000000:channel/{name}"
    return {"ChannelName": [name], "ChannelARN": [arn], "ServiceExecutionRoleARN": [ROLE]}


def _queue_names(sqs: Any, name: str) -> dict[str, list[Any]]:
    """A standard and a FIFO queue, each with a message received (its receipt handle in the pool).
    WaitTimeSeconds 0: a fuzzed ReceiveMessage answers at once instead of long polling."""
    urls = [sqs.create_queue(QueueName=name)["QueueUrl"],
            sqs.create_queue(QueueName=name + ".fifo", Attributes={"FifoQueue": "true",
                                                                     "ContentBasedDeduplication": "true"})["QueueUrl"]]
    handles = []
    for url in urls:
        sqs.send_message(QueueUrl=url, MessageBody="fuzz", **({"MessageGroupId": "g"} if url.endswith(".fifo") else {}))
        handles += [m["ReceiptHandle"] for m in sqs.receive_message(QueueUrl=url, VisibilityTimeout=3600).get(
            "Messages", [])]
    return {"QueueUrl": urls, "QueueName": [name, name + ".fifo"], "ReceiptHandle": handles, "WaitTimeSeconds": [0]}


def _kinesis_queue_names(kinesis: Any, name: str, stream_arn: str) -> dict[str, list[Any]]:
    """A Kinesis queue on the on-demand stream whose records are always visible (timeout 0, no
    dead letters): a fuzzed ReceiveQueueRecords without WaitTimeSeconds (default 9 s) answers at
    once. Its receipt handles join the pool."""
    arn = next((q["QueueARN"] for q in kinesis.list_queues(StreamFilter=[{"StreamARN": stream_arn}])[
        "QueueSummaries"] if q["QueueName"] == name), None)
    if arn is None:
        arn = kinesis.create_queue(QueueName=name, StreamConfigurationList=[
            {"StreamARN": stream_arn, "StartingPosition": {"Type": "TRIM_HORIZON"}}], QueueAttributes={
            "VisibilityTimeoutSeconds": 0, "DeadLetterConfiguration": {"TargetType": "NONE"}})[
            "QueueDescription"]["QueueARN"]
    kinesis.put_records(StreamARN=stream_arn, Records=[{"Data": b"fuzz", "PartitionKey": str(i)} for i in range(20)])
    handles = [r["ReceiptHandle"] for r in kinesis.receive_queue_records(QueueARN=arn, WaitTimeSeconds=1)[
        "QueueRecords"]]
    return {"QueueARN": [arn], "VisibilityTimeoutSeconds": [0], "KinesisReceiptHandle": handles}


def _log_names(logs: Any, group: str, function: str) -> dict[str, list[Any]]:
    """A log group with a stream holding events (the victims of fuzzed filter patterns); the
    function's group (named, not yet logged to)."""
    _quietly(logs.create_log_group, logGroupName=group)
    _quietly(logs.create_log_stream, logGroupName=group, logStreamName="fuzz-stream")
    now_ms = int(datetime.now(timezone.utc).timestamp() * 1000)
    logs.put_log_events(logGroupName=group, logStreamName="fuzz-stream",
                        logEvents=[{"timestamp": now_ms, "message": m} for m in ["fuzz", *v.VICTIMS]])
    arn = f"arn:aws:logs:us-east-1:000000000000:log-group:{group}"
    return {"logGroupName": [group, f"/aws/lambda/{function}"], "logStreamName": ["fuzz-stream"],
            "logGroupIdentifier": [group, arn], "resourceArn": [arn], "logStreamNamePrefix": ["fuzz"],
            "logGroupNamePrefix": ["/fuzz"]}


def stack_template(export: str, value: str = "fuzz") -> str:
    """The fuzzed stacks' template: an SSM parameter (cheap to make) whose value a parameter with an
    AllowedPattern gives, and an export of its name."""
    return (f"Parameters:\n  Value: {{Type: String, Default: {value}, AllowedPattern: '[a-z0-9]*'}}\n"
            "Resources:\n  Param:\n    Type: AWS::SSM::Parameter\n    Properties: {Type: String, Value: !Ref Value}\n"
            f"Outputs:\n  Name:\n    Value: !Ref Param\n    Export: {{Name: {export}}}\n")


def _settled(describe: Callable[[], str]) -> str:
    """The status `describe` reads once it is no longer in progress or pending, whatever it ends as
    (a stack or change set that an earlier run left failed still names something)."""
    for _ in range(300):
        status = describe()
        if not status.endswith(("_IN_PROGRESS", "_PENDING")):
            break
        time.sleep(0.2)
    return status


def _stack_names(cfn: Any, s3: Any, prefix: str, bucket: str) -> dict[str, list[Any]]:
    """A stack exporting a value, a second one importing it (so that ListImports has an answer and
    deleting the first fails as AWS's does), a change set waiting on the first, each made unless it
    exists; the templates that TemplateURL documents name, in the bucket."""
    for key, body in v.TEMPLATE_OBJECTS.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    stack, importer, export, change_set = (f"{prefix}-stack", f"{prefix}-importer", f"{prefix}-export",
                                           f"{prefix}-changes")

    def status(name: str) -> str:
        return cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"]

    _quietly(cfn.create_stack, StackName=stack, TemplateBody=stack_template(export))
    _settled(lambda: status(stack))
    _quietly(cfn.create_stack, StackName=importer, TemplateBody=(
        "Resources:\n  Param:\n    Type: AWS::SSM::Parameter\n"
        f"    Properties: {{Type: String, Value: !ImportValue {export}}}\n"))
    _settled(lambda: status(importer))
    _quietly(cfn.create_change_set, StackName=stack, ChangeSetName=change_set,
             TemplateBody=stack_template(export, "changed"))
    # (Gone when an earlier run deleted or executed it and the stack cannot take another now.)
    _settled(lambda: _quietly(cfn.describe_change_set, StackName=stack, ChangeSetName=change_set).get("Status", ""))
    found = _quietly(cfn.describe_change_set, StackName=stack, ChangeSetName=change_set)
    stack_id = cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackId"]
    physical = _quietly(cfn.describe_stack_resource, StackName=stack, LogicalResourceId="Param").get(
        "StackResourceDetail", {}).get("PhysicalResourceId")
    return {"cloudformation:StackName": [stack, stack_id],
            "cloudformation:ChangeSetName": [change_set, *([found["ChangeSetId"]] if found else [])],
            "cloudformation:LogicalResourceId": ["Param"], "cloudformation:PhysicalResourceId": [physical or stack_id],
            "cloudformation:ExportName": [export], "cloudformation:TemplateBody": [stack_template(export)]}


def _parameter_names(ssm: Any, prefix: str) -> dict[str, list[Any]]:
    """An SSM parameter with versions, a label on the latest and a tag (made again if it exists).
    Overwrite in the pool: a fuzzed PutParameter of it gets past "already exists"."""
    name = f"/{prefix}/param"
    _quietly(ssm.put_parameter, Name=name, Value="fuzz", Type="String", Overwrite=True)
    version = ssm.get_parameter(Name=name)["Parameter"]["Version"]
    # The latest: a label on the oldest of 100 versions refuses the next one (after a long run).
    ssm.label_parameter_version(Name=name, ParameterVersion=version, Labels=[f"{prefix}-label"])
    ssm.add_tags_to_resource(ResourceType="Parameter", ResourceId=name, Tags=[{"Key": "fuzz", "Value": "1"}])
    arn = ssm.get_parameter(Name=name)["Parameter"]["ARN"]
    return {"ssm:Name": [name, arn, f"{name}:{version}", f"{name}:{prefix}-label"], "ssm:Names": [[name, arn]],
            "ssm:Path": [f"/{prefix}"], "ssm:ResourceId": [name], "ssm:ResourceType": ["Parameter"],
            "ssm:ParameterVersion": [version], "ssm:Labels": [[f"{prefix}-label"]], "ssm:Overwrite": [True]}


LIFECYCLE_POLICY = ('{"rules": [{"rulePriority": 1, "selection": {"tagStatus": "untagged", "countType": '
                    '"imageCountMoreThan", "countNumber": 5}, "action": {"type": "expire"}}]}')
REPOSITORY_POLICY = ('{"Version": "2012-10-17", "Statement": [{"Sid": "fuzz", "Effect": "Allow", "Principal": "*", '
                     '"Action": ["ecr:BatchGetImage"]}]}')


def _repository_names(ecr: Any, name: str) -> dict[str, list[Any]]:
    """An ECR repository with a lifecycle policy, a repository policy and a tag, made unless it exists."""
    _quietly(ecr.create_repository, repositoryName=name, tags=[{"Key": "fuzz", "Value": "1"}])
    ecr.put_lifecycle_policy(repositoryName=name, lifecyclePolicyText=LIFECYCLE_POLICY)
    ecr.set_repository_policy(repositoryName=name, policyText=REPOSITORY_POLICY)
    repository = ecr.describe_repositories(repositoryNames=[name])["repositories"][0]
    return {"ecr:repositoryName": [name], "ecr:repositoryNames": [[name]], "ecr:registryId": [repository["registryId"]],
            "ecr:resourceArn": [repository["repositoryArn"]], "ecr:lifecyclePolicyText": [LIFECYCLE_POLICY],
            "ecr:policyText": [REPOSITORY_POLICY]}


def _sts_names(sts: Any, session: str) -> dict[str, list[Any]]:
    """A role's session credentials, for GetAccessKeyInfo to look up."""
    key = sts.assume_role(RoleArn=ROLE, RoleSessionName=session)["Credentials"]["AccessKeyId"]
    return {"sts:RoleArn": [ROLE], "sts:RoleSessionName": [session], "sts:AccessKeyId": [key]}


def create_resources(url: str, prefix: str = "fuzz") -> list[dict[str, list[Any]]]:
    """Two streams, provisioned and on-demand (some operations take only one kind), each with a
    consumer and a record; a bucket with an object and an open multipart upload; a Kinesis channel
    from the on-demand stream into it; a delivery stream into it; a function with a mapping from
    the first stream; queues, a log group, a topic; CloudFormation stacks and a change set (and the
    templates TemplateURL documents name, in the bucket); an SSM parameter; an ECR repository; role
    session credentials. Each is created unless it exists. The pools for `Fuzzer`: one set of names
    per stream, the rest shared."""
    kinesis, firehose, s3, lam = (client(url, s) for s in ("kinesis", "firehose", "s3", "lambda"))
    bucket, key, delivery, function = f"{prefix}-bucket", f"{prefix}-key", f"{prefix}-delivery", f"{prefix}-fn"
    streams = [_stream_names(kinesis, f"{prefix}-stream", f"{prefix}-consumer", ShardCount=2),
               _stream_names(kinesis, f"{prefix}-ondemand", f"{prefix}-consumer",
                             StreamModeDetails={"StreamMode": "ON_DEMAND"})]
    _quietly(s3.create_bucket, Bucket=bucket)
    s3.put_object(Bucket=bucket, Key=key, Body=b"fuzz")
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    streams[1].update(_channel_names(kinesis, f"{prefix}-channel", streams[1]["StreamARN"][0], bucket))
    _quietly(firehose.create_delivery_stream, DeliveryStreamName=delivery, DeliveryStreamType="DirectPut",
             ExtendedS3DestinationConfiguration={"RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{bucket}"})
    described = firehose.describe_delivery_stream(DeliveryStreamName=delivery)["DeliveryStreamDescription"]
    _quietly(lam.create_function, FunctionName=function, Runtime="python3.12", Role=ROLE, Handler="app.handler",
             Code={"ZipFile": function_zip()})
    function_arn = lam.get_function(FunctionName=function)["Configuration"]["FunctionArn"]
    mappings = lam.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]
    mapping = mappings[0]["UUID"] if mappings else lam.create_event_source_mapping(
        FunctionName=function, EventSourceArn=streams[0]["StreamARN"][0], StartingPosition="LATEST")["UUID"]
    queues = _queue_names(client(url, "sqs"), f"{prefix}-queue")
    kinesis_queue = _kinesis_queue_names(kinesis, f"{prefix}-kinesis-queue", streams[1]["StreamARN"][0])
    queues["ReceiptHandle"] += kinesis_queue.pop("KinesisReceiptHandle")
    log_names = _log_names(client(url, "logs"), f"/{prefix}/group", function)
    sns = client(url, "sns")
    topic = sns.create_topic(Name=f"{prefix}-topic")["TopicArn"]
    subscription = sns.subscribe(TopicArn=topic, Protocol="firehose", Endpoint=described["DeliveryStreamARN"],
                                 Attributes={"SubscriptionRoleArn": ROLE})["SubscriptionArn"]
    shared = {
        "TopicArn": [topic], "TargetArn": [topic], "ResourceArn": [topic], "SubscriptionArn": [subscription],
        "DeliveryStreamName": [delivery], "RoleARN": [ROLE], "BucketARN": [f"arn:aws:s3:::{bucket}"],
        "CurrentDeliveryStreamVersionId": [described["VersionId"]],
        "DestinationId": [d["DestinationId"] for d in described["Destinations"]],
        # What fuzzed filter policies, event patterns and partitioning queries then run on.
        "Message": ["fuzz", *v.VICTIMS], "Data": [b"fuzz", *(m.encode() for m in v.VICTIMS)],
        "FunctionName": [function, function_arn], "Role": [ROLE], "Handler": ["app.handler"],
        "Runtime": ["python3.12"], "ZipFile": [function_zip()], "UUID": [mapping], "Resource": [function_arn],
        "Bucket": [bucket], "Key": [key], "UploadId": [upload], "CopySource": [f"{bucket}/{key}"],
        "S3Bucket": [bucket], "S3Key": [key], **queues, **kinesis_queue, **log_names,
        **_stack_names(client(url, "cloudformation"), s3, prefix, bucket),
        **_parameter_names(client(url, "ssm"), prefix), **_repository_names(client(url, "ecr"), f"{prefix}-repo"),
        **_sts_names(client(url, "sts"), f"{prefix}-session"),
    }
    return [{**shared, **names} for names in streams]
