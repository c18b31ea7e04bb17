"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44): a topic's configs are its
stream's settings (kinesim/kafka/configs.py says which); broker 0's are static.

AlterConfigs replaces a topic's whole set, as Kafka's does: a config it leaves out goes back to
its default (so `retention.ms` left out is 24 h again). IncrementalAlterConfigs changes only the
ones named (SET, DELETE = back to the default, APPEND/SUBTRACT on list configs). A retention change
is IncreaseRetentionPeriod or DecreaseRetentionPeriod, a record size change UpdateMaxRecordSize.
"""
from __future__ import annotations

import time
from typing import Any

from ...kinesis import streams
from ...protocol.errors import AwsError
from .. import configs, errors, topics
from ..context import Context
from .admin import settled

TOPIC, BROKER = 2, 4  # resource types (org.apache.kafka.common.config.ConfigResource.Type)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
WAIT_S = 30.0  # for a stream's own change (UPDATING) to end before another is asked for


def describe_configs(ctx: Context, body: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "results": [_describe(ctx, r) for r in body.resources]}


def _describe(ctx: Context, resource: Any) -> dict[str, Any]:
    kind, name, keys = resource.resource_type, resource.resource_name, resource.configuration_keys
    answer = {"resource_type": kind, "resource_name": name, "error_code": errors.NONE, "error_message": None,
              "configs": []}
    if kind == BROKER:
        code, message = _broker_named(ctx, name)
        if code:
            return {**answer, "error_code": code, "error_message": message}
        return {**answer, "configs": configs.describe_broker(keys)}
    if kind != TOPIC:
        return {**answer, "error_code": errors.INVALID_REQUEST, "error_message": f"Unsupported resource type: {kind}"}
    stream, code = topics.find(ctx.kinesis, name)
    if stream is None:
        return {**answer, "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                "error_message": f"Topic '{name}' does not exist."}
    return {**answer, "configs": configs.describe(stream.retention_hours, stream.max_record_size_kib, keys)}


def _broker_named(ctx: Context, name: str) -> tuple[int, str | None]:
    if name in ("", str(ctx.node_id)):  # "": the cluster-wide defaults, the same here
        return errors.NONE, None
    return errors.INVALID_REQUEST, f"Unexpected broker id, expected {ctx.node_id} or empty string, but received {name}"


async def alter_configs(ctx: Context, body: Any) -> dict[str, Any]:
    out = []
    for resource in body.resources:
        given = [(c.name, c.value) for c in resource.configs]
        out.append(await _alter(ctx, resource, body.validate_only, lambda current: _replace(given)))
    return {"throttle_time": 0, "responses": out}


async def incremental_alter_configs(ctx: Context, body: Any) -> dict[str, Any]:
    out = []
    for resource in body.resources:
        ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
        out.append(await _alter(ctx, resource, body.validate_only, lambda current, ops=ops: _apply(current, ops)))
    return {"throttle_time": 0, "responses": out}


def _replace(given: list[tuple[str, str | None]]) -> configs.Settings:
    names = [n for n, _ in given]
    if len(set(names)) != len(names):
        raise _Refused(errors.INVALID_REQUEST, "Error due to duplicate config keys")
    wanted = configs.check(given)
    return configs.Settings(wanted.retention_hours or configs.DEFAULT_HOURS,
                            wanted.max_record_kib or configs.DEFAULT_KIB)


def _apply(current: configs.Settings, ops: list[tuple[str, int, str | None]]) -> configs.Settings:
    names = [n for n, _, _ in ops]
    if len(set(names)) != len(names):
        raise _Refused(errors.INVALID_REQUEST, "Error due to duplicate config keys")
    hours, kib = current.retention_hours, current.max_record_kib
    for name, op, value in ops:
        kind = configs.KNOWN.get(name)
        if kind is None:
            raise configs.ConfigError(f"Unknown topic config name: {name}")
        if op == DELETE:
            if name == configs.RETENTION:
                hours = configs.DEFAULT_HOURS
            elif name == configs.MAX_BYTES:
                kib = configs.DEFAULT_KIB
            continue
        if op in (APPEND, SUBTRACT):
            if kind != configs.LIST:
                verb = "append" if op == APPEND else "subtract"
                raise configs.ConfigError(f"Config value {verb} is not allowed for config key: {name}")
            listed = configs.as_list(configs.FIXED.get(name, configs.IGNORED.get(name, (0, "")))[1])
            items = configs.as_list(value or "")
            listed = listed + [v for v in items if v not in listed] if op == APPEND else \
                [v for v in listed if v not in items]
            value = ",".join(listed)
        elif op != SET:
            raise _Refused(errors.INVALID_REQUEST, f"Unknown config operation {op} for {name}")
        wanted = configs.check([(name, value)])
        hours = wanted.retention_hours or hours
        kib = wanted.max_record_kib or kib
    return configs.Settings(hours, kib)


class _Refused(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


async def _alter(ctx: Context, resource: Any, validate_only: bool, change: Any) -> dict[str, Any]:
    kind, name = resource.resource_type, resource.resource_name
    answer = {"resource_type": kind, "resource_name": name, "error_code": errors.NONE, "error_message": None}
    if kind == BROKER:
        code, message = _broker_named(ctx, name)
        return {**answer, "error_code": code or errors.INVALID_REQUEST,
                "error_message": message or "kinesim's broker configs are static: none can be updated dynamically"}
    if kind != TOPIC:
        return {**answer, "error_code": errors.INVALID_REQUEST, "error_message": f"Unsupported resource type: {kind}"}
    # A stream being resharded or made refuses retention changes (ResourceInUseException): wait.
    stream = await settled(ctx, name, time.time() + WAIT_S)
    if stream is None or stream.status == "DELETING":
        return {**answer, "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                "error_message": f"Topic '{name}' does not exist."}
    try:
        wanted = change(configs.Settings(stream.retention_hours, stream.max_record_size_kib))
        if not validate_only:
            await ctx.blocking(_set, ctx.kinesis, stream, wanted)
    except configs.ConfigError as err:
        return {**answer, "error_code": errors.INVALID_CONFIG, "error_message": str(err)}
    except _Refused as err:
        return {**answer, "error_code": err.code, "error_message": err.message}
    except AwsError as err:
        return {**answer, "error_code": errors.INVALID_REQUEST, "error_message": err.message}
    return answer


def _set(svc: Any, stream: Any, wanted: configs.Settings) -> None:
    target = {"StreamName": stream.name}
    hours = wanted.retention_hours
    if hours is not None and hours != stream.retention_hours:
        grow = hours > stream.retention_hours
        (streams.increase_retention if grow else streams.decrease_retention)(
            svc, {**target, "RetentionPeriodHours": hours})
    kib = wanted.max_record_kib
    if kib is not None and kib != stream.max_record_size_kib:
        streams.update_max_record_size(svc, {**target, "MaxRecordSizeInKiB": kib})
