"""Nulls where the schema allows none. kio reads a null array or string (length -1) into None even
for a field that is not nullable at that version; Kafka's own parser refuses such a request
("non-nullable field ... was serialized as null"), and so does kinesim (codec.decode closes the
connection), so that no handler meets None where a list or a string must be (the Kafka port's
fuzz sweep, tests/test_kafka_fuzz.py, found handlers iterating None)."""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

# class -> [(field, nullable, item)]: `item` is "array" of plain values, "value" (a string, bytes),
# or the entity class of an array's items or of a struct field.
_plans: dict[type, list[tuple[str, bool, Any]]] = {}


def check(entity: Any) -> None:
    """ValueError naming the first non-nullable field that is None."""
    for name, nullable, item in _plans.get(type(entity)) or _plan(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if nullable:
                continue
            raise ValueError(f"non-nullable field {type(entity).__name__}.{name} was serialized as null")
        if item in ("array", "value"):
            continue
        if isinstance(value, tuple):
            for x in value:
                check(x)
        else:
            check(value)


def _plan(cls: type) -> list[tuple[str, bool, Any]]:
    hints = typing.get_type_hints(cls)
    plan: list[tuple[str, bool, Any]] = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        nullable = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)
        if nullable:
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        if typing.get_origin(hint) is tuple:
            inner = typing.get_args(hint)[0]
            plan.append((f.name, nullable, inner if dataclasses.is_dataclass(inner) else "array"))
        elif dataclasses.is_dataclass(hint):
            plan.append((f.name, nullable, hint))
        elif isinstance(hint, type) and issubclass(hint, (str, bytes)):
            plan.append((f.name, nullable, "value"))
    _plans[cls] = plan
    return plan
