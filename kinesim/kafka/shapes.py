"""Plain dict trees -> kio's frozen dataclasses of one API version.

kio makes a module per version, each with its own nested classes, and a field a version lacks is
not accepted by its constructor. Handlers build one plain tree for every version (kio's field
names: `throttle_time`, `error_code`, ...); `build` keeps what the version has, fills what the
tree leaves out (the field's default, else a zero value) and converts the values kio's writer
needs typed (error codes as `ErrorCode`, durations as `timedelta`). The plan per class is made
once.
"""
from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any, Callable

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta, i64Timedelta

_plans: dict[type, list[tuple[str, Callable[[Any], Any], Callable[[], Any] | None]]] = {}


def build(cls: type, tree: dict[str, Any]) -> Any:
    plan = _plans.get(cls)
    if plan is None:
        plan = _plans[cls] = _plan(cls)
    values = {}
    for name, convert, missing in plan:
        if name in tree:
            values[name] = convert(tree[name])
        elif missing is not None:
            values[name] = missing()
    return cls(**values)


def _plan(cls: type) -> list[tuple[str, Callable[[Any], Any], Callable[[], Any] | None]]:
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        convert, zero = _converter(hints[f.name])
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        # A field with a default is left to the dataclass; one without gets the type's zero value.
        plan.append((f.name, convert, None if has_default else zero))
    return plan


def _same(value: Any) -> Any:
    return value


def _converter(hint: Any) -> tuple[Callable[[Any], Any], Callable[[], Any]]:
    """How to convert a tree's value for a field of this type, and the value of a missing one."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        convert, _ = _converter(inner[0])
        return (lambda v: None if v is None else convert(v)), lambda: None
    if typing.get_origin(hint) is tuple:
        item = args[0]
        if dataclasses.is_dataclass(item):
            return (lambda v: tuple(build(item, x) for x in v)), tuple
        convert, _ = _converter(item)
        return (lambda v: tuple(convert(x) for x in v)), tuple
    if dataclasses.is_dataclass(hint):
        return (lambda v: build(hint, v)), lambda: build(hint, {})
    if hint is ErrorCode:
        return (lambda v: v if isinstance(v, ErrorCode) else ErrorCode(v)), lambda: ErrorCode.none
    if isinstance(hint, type) and issubclass(hint, (i32Timedelta, i64Timedelta, datetime.timedelta)):
        return (lambda v: v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=v)), \
            datetime.timedelta
    if hint is uuid.UUID:
        return _same, lambda: uuid.UUID(int=0)
    if isinstance(hint, type) and issubclass(hint, bool):
        return bool, lambda: False
    if isinstance(hint, type) and issubclass(hint, int):
        return _same, lambda: 0
    if isinstance(hint, type) and issubclass(hint, bytes):
        return _same, bytes
    if isinstance(hint, type) and issubclass(hint, str):
        return _same, str
    return _same, lambda: None
