"""AWS's query protocol, driven by botocore's model: form parameters in, XML out.

Requests are `Action=Publish&Version=2010-03-31&TopicArn=...` (a form-urlencoded POST body, or the
query string of a GET). Nested members are flattened as botocore's QuerySerializer writes them:
structures `Name.Member`, lists `Name.member.N`, maps `Name.entry.N.key` / `.value` (or the
names the model gives the key and value, `Name`/`Value` for MessageAttributes). `decode` rebuilds
the nested parameters from the operation's input shape; members the model does not know are
ignored, as AWS ignores them.

Answers are `<ActionResponse xmlns=...><ActionResult>...</ActionResult><ResponseMetadata>
<RequestId>` as botocore's QueryParser reads them; errors `<ErrorResponse><Error><Type>Sender
</Type><Code>...</Code><Message>...</Message></Error><RequestId>`.
"""
from __future__ import annotations

import base64
import binascii
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qsl

from .errors import AwsError
from .models import load_service_model
from .xml_text import escape


# The depth counted for a shape that contains itself (SNS's model has none).
_RECURSIVE_PARTS = 32


def parse_form(text: str) -> dict[str, str]:
    """A form's pairs (the last value wins for a repeated name, as AWS's front end takes it)."""
    return dict(parse_qsl(text, keep_blank_values=True))


class QueryModel:
    """One service's model, for decoding requests and encoding answers."""

    def __init__(self, service: str):
        model = load_service_model(service)
        self.shapes: dict[str, dict[str, Any]] = model["shapes"]
        self.ops: dict[str, dict[str, Any]] = model["operations"]
        self.namespace: str = model["metadata"]["xmlNamespace"]
        self.version: str = model["metadata"]["apiVersion"]
        # Per input shape, how many dot-separated parts its longest parameter name has
        # (`Attributes.entry.1.value`: 4). A form name with more parts names no member: it is
        # ignored, as AWS ignores what its model does not know, before anything is built from it.
        self.max_parts: dict[str, int] = {
            op["input"]["shape"]: self._parts(self.shapes[op["input"]["shape"]], frozenset())
            for op in self.ops.values() if "input" in op}

    # requests

    def decode(self, operation: str, form: dict[str, str]) -> dict[str, Any]:
        """The operation's nested parameters from the flat form. A required member that is
        missing is AWS's ValidationError (its front end checks them before the service does)."""
        op = self.ops[operation]
        if "input" not in op:
            return {}
        shape = op["input"]["shape"]
        keys = _Keys(form, self.max_parts[shape])
        value = self._decode(self.shapes[shape], "", keys, "")
        return value or {}

    def _parts(self, shape: dict[str, Any], seen: frozenset[int]) -> int:
        if id(shape) in seen:  # a recursive shape (none in SNS's model): bounded all the same
            return _RECURSIVE_PARTS
        seen = seen | {id(shape)}
        kind = shape["type"]
        if kind == "structure":
            return max((1 + self._parts(self.shapes[m["shape"]], seen) for m in shape["members"].values()), default=0)
        if kind == "list":  # Name.member.N, or Name.N when flattened
            return (1 if shape.get("flattened") else 2) + self._parts(self.shapes[shape["member"]["shape"]], seen)
        if kind == "map":  # Name.entry.N.key / .value, or Name.N.key when flattened
            return (2 if shape.get("flattened") else 3) + self._parts(self.shapes[shape["value"]["shape"]], seen)
        return 0

    def _decode(self, shape: dict[str, Any], prefix: str, keys: "_Keys", path: str) -> Any:
        kind = shape["type"]
        if kind == "structure":
            out: dict[str, Any] = {}
            for name, member in shape["members"].items():
                key = _join(prefix, member.get("locationName", name))
                if not keys.has(key):
                    continue
                value = self._decode(self.shapes[member["shape"]], key, keys, _join(path, _camel(name)))
                if value is not None:
                    out[name] = value
            for name in shape.get("required", ()):
                if name not in out:
                    raise _null_member(_join(path, _camel(name)))
            return out
        if kind == "list":
            member = shape["member"]
            item_shape = self.shapes[member["shape"]]
            base = prefix if shape.get("flattened") else prefix + "." + member.get("locationName", "member")
            items = []
            for n in keys.indexes(base):
                items.append(self._decode(item_shape, f"{base}.{n}", keys, f"{path}.{n}.member"))
            return items
        if kind == "map":
            key_name = shape["key"].get("locationName", "key")
            value_name = shape["value"].get("locationName", "value")
            value_shape = self.shapes[shape["value"]["shape"]]
            base = prefix if shape.get("flattened") else prefix + ".entry"
            out = {}
            for n in keys.indexes(base):
                entry = f"{base}.{n}"
                k = keys.get(f"{entry}.{key_name}")
                if k is None:
                    continue
                out[k] = self._decode(value_shape, f"{entry}.{value_name}", keys, f"{path}.{k}.member")
            return out
        return _scalar(kind, keys.get(prefix), prefix.rsplit(".", 1)[-1])

    # answers

    def answer(self, operation: str, result: dict[str, Any] | None, request_id: str) -> bytes:
        op = self.ops[operation]
        inner = ""
        output = op.get("output")
        if output is not None:  # an empty result is still wrapped: botocore looks for the wrapper
            body = self._encode(self.shapes[output["shape"]], result or {})
            wrapper = output.get("resultWrapper", f"{operation}Result")
            inner = f"<{wrapper}>{body}</{wrapper}>"
        return (f'<?xml version="1.0"?>\n<{operation}Response xmlns="{self.namespace}">{inner}'
                f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
                f"</{operation}Response>").encode()

    def _encode(self, shape: dict[str, Any], value: Any) -> str:
        kind = shape["type"]
        if kind == "structure":
            parts = []
            for name, member in shape["members"].items():
                if name in value and value[name] is not None:
                    tag = member.get("locationName", name)
                    parts.append(f"<{tag}>{self._encode(self.shapes[member['shape']], value[name])}</{tag}>")
            return "".join(parts)
        if kind == "list":
            tag = shape["member"].get("locationName", "member")
            item = self.shapes[shape["member"]["shape"]]
            return "".join(f"<{tag}>{self._encode(item, v)}</{tag}>" for v in value)
        if kind == "map":
            k_tag = shape["key"].get("locationName", "key")
            v_tag = shape["value"].get("locationName", "value")
            v_shape = self.shapes[shape["value"]["shape"]]
            return "".join(f"<entry><{k_tag}>{escape(str(k))}</{k_tag}><{v_tag}>{self._encode(v_shape, v)}</{v_tag}>"
                           f"</entry>" for k, v in value.items())
        if kind == "boolean":
            return "true" if value else "false"
        if kind == "blob":
            return base64.b64encode(value).decode()
        if kind == "timestamp":
            return datetime.fromtimestamp(value, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return escape(str(value))

    def error(self, err: AwsError, request_id: str) -> bytes:
        kind = "Receiver" if err.status >= 500 else "Sender"
        message = f"<Message>{escape(err.message)}</Message>" if err.message is not None else ""
        return (f'<?xml version="1.0"?>\n<ErrorResponse xmlns="{self.namespace}"><Error><Type>{kind}</Type>'
                f"<Code>{escape(err.code)}</Code>{message}</Error><RequestId>{request_id}</RequestId>"
                f"</ErrorResponse>").encode()


class _Keys:
    """The form's names, with the prefixes of nested members precomputed.

    Only names with at most `max_parts` parts get prefixes: each of a name's prefixes is a copy of
    part of it, so a name with n dots would otherwise cost n copies of up to n characters (a 16 KB
    name of dots: 128 MB). Bounded so, the prefixes cost at most max_parts times the body."""

    def __init__(self, form: dict[str, str], max_parts: int):
        self.form = form
        self.prefixes: set[str] = set()
        for key in form:
            if key.count(".") >= max_parts:  # more parts than any member's name: names nothing
                continue
            end = key.find(".")
            while end != -1:
                self.prefixes.add(key[:end])
                end = key.find(".", end + 1)

    def has(self, key: str) -> bool:
        return key in self.form or key in self.prefixes

    def get(self, key: str) -> str | None:
        return self.form.get(key)

    def indexes(self, base: str) -> list[int]:
        """The item numbers present under `base` (1, 2, ...: AWS reads them in order, stopping at
        the first gap)."""
        n = 1
        found = []
        while self.has(f"{base}.{n}"):
            found.append(n)
            n += 1
        return found


def _scalar(kind: str, text: str | None, name: str) -> Any:
    if text is None:
        return None
    try:
        if kind in ("integer", "long"):
            return int(text)
        if kind == "boolean":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if kind == "blob":
            return base64.b64decode(text, validate=True)
        if kind in ("double", "float"):
            return float(text)
    except (ValueError, binascii.Error):
        raise AwsError("InvalidParameter", f"Invalid parameter: {name}") from None
    return text


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _null_member(path: str) -> AwsError:
    # The front end's text for a missing required member (LocalStack's recordings of AWS:
    # "Value null at 'messageAttributes.attr1.member.dataType'", "... at 'attributes'").
    return AwsError("ValidationError", f"1 validation error detected: Value null at '{path}' failed to satisfy "
                                       "constraint: Member must not be null")
