"""Stream lifecycle and settings: create, delete, describe, list, mode, retention, encryption,
enhanced monitoring, limits, record size, warm throughput, account settings."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..protocol.errors import AwsError, in_use, invalid_argument, limit_exceeded
from . import channels
from .model import Shard, Stream, even_ranges
from .tag_rules import check_new_tags

if TYPE_CHECKING:
    from .service import KinesisService

ON_DEMAND_SHARDS = 4          # shards an on-demand stream starts with
ON_DEMAND_STREAM_LIMIT = 50   # AWS's default on-demand streams per account
MAX_WARM_MIBPS = 10 * 1024    # "By default, you cannot ... scale to more than 10 GiBps for an on-demand stream"
ALL_METRICS = ["IncomingBytes", "IncomingRecords", "OutgoingBytes", "OutgoingRecords",
               "WriteProvisionedThroughputExceeded", "ReadProvisionedThroughputExceeded",
               "IteratorAgeMilliseconds"]


def check_shard_limit(svc: KinesisService, additional: int) -> None:
    current = svc.total_open_shards()
    if current + additional > svc.settings.shard_limit:
        raise limit_exceeded(
            f"This request would exceed the shard limit for the account {svc.account} in {svc.settings.region}. "
            f"Current shard count for the account: {current}. Limit: {svc.settings.shard_limit}. "
            f"Number of additional shards that would have resulted from this request: {additional}. "
            "Refer to the AWS Service Limits page (http://docs.aws.amazon.com/general/latest/gr/"
            "aws_service_limits.html) for current limits and how to request higher limits.")


def create_stream(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    name = p["StreamName"]
    mode = p.get("StreamModeDetails", {}).get("StreamMode", "PROVISIONED")
    if mode == "PROVISIONED":
        if "ShardCount" not in p:
            raise invalid_argument("ShardCount is required for a stream in PROVISIONED mode.")
        count = p["ShardCount"]
    else:
        count = p.get("ShardCount", ON_DEMAND_SHARDS)
    warm = p.get("WarmThroughputMiBps")
    if warm is not None:
        check_warm_throughput(warm)
    distribution = p.get("RecordDistributionStrategy", "USER_PARTITION_KEY")
    if distribution == "AUTO" and mode != "ON_DEMAND":
        raise distribution_needs_on_demand(svc, name)
    tags = dict(p.get("Tags") or {})
    if tags:  # AddTagsToStream's checks, before anything exists
        check_new_tags({}, tags, f"stream {name} under account {svc.account}")
    # Settle a due DELETING -> gone first: settling takes the stream's lock, which must not be
    # waited for while holding svc.lock (see the lock order in KinesisService).
    svc.find(name)
    with svc.lock:
        if name in svc.streams:
            raise in_use(f"Stream {name} under account {svc.account} already exists.")
        if mode == "ON_DEMAND" and sum(s.mode == "ON_DEMAND" for s in svc.streams.values()) >= ON_DEMAND_STREAM_LIMIT:
            raise limit_exceeded(f"This request would exceed the on-demand stream limit for the account {svc.account}.")
        check_shard_limit(svc, count)  # before anything is allocated
        now = time.time()
        stream = Stream(name=name, arn=svc.stream_arn(name), created=now, mode=mode,
                        tags=tags,
                        max_record_size_kib=p.get("MaxRecordSizeInKiB", 1024),
                        warm_throughput_mibps=warm, distribution=distribution)
        stream.shards = [Shard(uid=svc.new_shard_uid(), index=i, start_hash=lo, end_hash=hi, created=int(now))
                         for i, (lo, hi) in enumerate(even_ranges(count))]
        svc.begin(stream, "CREATING", svc.settings.create_stream_ms)
        svc.add(stream)
    return {}


def delete_stream(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.stream(p)
    with stream.lock:
        if stream.status == "DELETING":
            return {}
        # EnforceConsumerDeletion does not apply to queues and channels.
        svc.queues.refuse_if_any(stream, "delete the stream")
        channels.refuse_if_any(svc, stream)
        if stream.consumers and not p.get("EnforceConsumerDeletion"):
            raise in_use(f"Stream {stream.name} under account {svc.account} has registered consumers. "
                         "Either deregister the consumers or set EnforceConsumerDeletion to true.")
        svc.begin(stream, "DELETING", svc.settings.delete_stream_ms)
        if stream.ready_at and stream.ready_at <= time.time():
            svc.drop(stream)
        else:
            svc.save(stream)
    return {}


def monitoring(stream: Stream) -> list[dict[str, Any]]:
    return [{"ShardLevelMetrics": list(stream.shard_level_metrics)}]


def mode_details(stream: Stream) -> dict[str, str]:
    return {"StreamMode": stream.mode}


def describe_stream(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.stream(p)
    shards = svc.visible_shards(stream)
    start = p.get("ExclusiveStartShardId")
    if start is not None:
        shards = [s for s in shards if s.shard_id > start]
    limit = p.get("Limit", 100)
    page = shards[:limit]
    desc: dict[str, Any] = {
        "StreamName": stream.name, "StreamARN": stream.arn, "StreamStatus": stream.status,
        "StreamModeDetails": mode_details(stream),
        "Shards": [s.describe() for s in page], "HasMoreShards": len(shards) > limit,
        "RetentionPeriodHours": stream.retention_hours, "StreamCreationTimestamp": stream.created,
        "EnhancedMonitoring": monitoring(stream), "EncryptionType": stream.encryption_type,
    }
    if stream.key_id:
        desc["KeyId"] = stream.key_id
    return {"StreamDescription": desc}


def describe_stream_summary(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.stream(p)
    summary: dict[str, Any] = {
        "StreamName": stream.name, "StreamARN": stream.arn, "StreamStatus": stream.status,
        "StreamModeDetails": mode_details(stream), "RetentionPeriodHours": stream.retention_hours,
        "StreamCreationTimestamp": stream.created, "EnhancedMonitoring": monitoring(stream),
        "EncryptionType": stream.encryption_type,
        "OpenShardCount": len(stream.open_shards()) if stream.activated else 0,
        "ConsumerCount": len(stream.consumers), "MaxRecordSizeInKiB": stream.max_record_size_kib,
    }
    if stream.key_id:
        summary["KeyId"] = stream.key_id
    if stream.warm_throughput_mibps is not None:
        summary["WarmThroughput"] = warm_throughput(stream)
    summary["ChannelCount"] = len(channels.on_stream(svc, stream))
    summary["QueueCount"] = len(svc.queues.on_stream(stream))
    if stream.mode == "ON_DEMAND":  # "only present for streams that use the on-demand capacity mode" (model)
        summary["RecordDistributionStrategy"] = stream.distribution
    return {"StreamDescriptionSummary": summary}


def list_streams(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    names = sorted(s.name for s in svc.all_streams())
    start = p.get("ExclusiveStartStreamName")
    token = p.get("NextToken")
    if token is not None:
        if start is not None:
            raise invalid_argument("NextToken and ExclusiveStartStreamName cannot be provided together.")
        start = _decode_token(token)
    if start is not None:
        names = [n for n in names if n > start]
    limit = p.get("Limit", 100)
    page, more = names[:limit], len(names) > limit
    out: dict[str, Any] = {
        "StreamNames": page, "HasMoreStreams": more,
        "StreamSummaries": [
            {"StreamName": s.name, "StreamARN": s.arn, "StreamStatus": s.status,
             "StreamModeDetails": mode_details(s), "StreamCreationTimestamp": s.created}
            for s in (svc.streams[n] for n in page)],
    }
    if more:
        out["NextToken"] = _encode_token(page[-1])
    return out


def _encode_token(last_name: str) -> str:
    import base64
    return base64.urlsafe_b64encode(("streams|" + last_name).encode()).decode()


def _decode_token(token: str) -> str:
    import base64
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except Exception:
        text = ""
    if not text.startswith("streams|"):
        raise invalid_argument(f"Invalid NextToken: {token}")
    return text[len("streams|"):]


def update_stream_mode(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.active_stream(p)
    mode = p["StreamModeDetails"]["StreamMode"]
    with stream.lock:
        if mode == "PROVISIONED":
            svc.queues.refuse_if_any(stream, "switch it to PROVISIONED mode")
        if mode == stream.mode:
            raise invalid_argument(f"Stream {stream.name} under account {svc.account} is already in {mode} mode.")
        if stream.distribution == "AUTO":
            # Provisioned streams "do not support the record distribution strategy setting" (the
            # model); what AWS does to an AUTO stream asked to become one is not documented.
            # Refusing keeps keyless producers working; the text is ours.
            raise invalid_argument(f"Stream {stream.name} under account {svc.account} uses the AUTO record "
                                   "distribution strategy, which PROVISIONED mode does not support. Set it to "
                                   "USER_PARTITION_KEY first.")
        stream.mode = mode
        stream.mode_changed_at = time.time()
        svc.begin(stream, "UPDATING", svc.settings.update_stream_ms)
        svc.save(stream)
    return {}


def _retention_bounds(hours: int) -> None:
    if hours < 24:
        raise invalid_argument(
            f"Minimum allowed retention period is 24 hours. Requested retention period ({hours} hours) is too short.")
    if hours > 8760:
        raise invalid_argument(
            f"Maximum allowed retention period is 8760 hours. Requested retention period ({hours} hours) is too long.")


def increase_retention(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    hours = p["RetentionPeriodHours"]
    stream = svc.active_stream(p)
    _retention_bounds(hours)
    with stream.lock:
        if hours < stream.retention_hours:
            raise invalid_argument(
                f"Requested retention period ({hours} hours) for stream {stream.name} can not be shorter than "
                f"existing retention period ({stream.retention_hours} hours). Use DecreaseRetentionPeriod API.")
        stream.retention_hours = hours
        svc.save(stream)
    return {}


def decrease_retention(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    hours = p["RetentionPeriodHours"]
    stream = svc.active_stream(p)
    _retention_bounds(hours)
    with stream.lock:
        if hours > stream.retention_hours:
            raise invalid_argument(
                f"Requested retention period ({hours} hours) for stream {stream.name} can not be longer than "
                f"existing retention period ({stream.retention_hours} hours). Use IncreaseRetentionPeriod API.")
        stream.retention_hours = hours
        svc.save(stream)
    return {}


def start_encryption(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.active_stream(p)
    with stream.lock:
        stream.encryption_type, stream.key_id = p["EncryptionType"], p["KeyId"]
        svc.begin(stream, "UPDATING", svc.settings.update_stream_ms)
        svc.save(stream)
    return {}


def stop_encryption(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.active_stream(p)
    with stream.lock:
        stream.encryption_type, stream.key_id = "NONE", None
        svc.begin(stream, "UPDATING", svc.settings.update_stream_ms)
        svc.save(stream)
    return {}


def _monitoring_change(svc: KinesisService, p: dict[str, Any], enable: bool) -> dict[str, Any]:
    stream = svc.active_stream(p)
    asked = ALL_METRICS if "ALL" in p["ShardLevelMetrics"] else p["ShardLevelMetrics"]
    with stream.lock:
        current = list(stream.shard_level_metrics)
        if enable:
            desired = current + [m for m in asked if m not in current]
        else:
            desired = [m for m in current if m not in asked]
        stream.shard_level_metrics = desired
        svc.save(stream)
    return {"StreamName": stream.name, "StreamARN": stream.arn,
            "CurrentShardLevelMetrics": current, "DesiredShardLevelMetrics": desired}


def enable_monitoring(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    return _monitoring_change(svc, p, True)


def disable_monitoring(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    return _monitoring_change(svc, p, False)


def describe_limits(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    streams = svc.all_streams()
    return {"ShardLimit": svc.settings.shard_limit, "OpenShardCount": svc.total_open_shards(),
            "OnDemandStreamCount": sum(s.mode == "ON_DEMAND" for s in streams),
            "OnDemandStreamCountLimit": ON_DEMAND_STREAM_LIMIT}


def update_max_record_size(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.active_stream(p)
    with stream.lock:
        stream.max_record_size_kib = p["MaxRecordSizeInKiB"]
        svc.save(stream)
    return {}


def check_warm_throughput(mibps: int) -> None:
    """AWS's default limit on warm throughput, checked before anything is stored.

    The model bounds WarmThroughputMiBps below only (min 0); the operation's documentation lists
    "scale to more than 10 GiBps" among what its default limits forbid. Like UpdateShardCount's
    default limits, a breach is a LimitExceededException; the wording is ours (AWS's is not
    recorded anywhere public)."""
    if mibps > MAX_WARM_MIBPS:
        raise limit_exceeded(f"Warm throughput cannot be greater than {MAX_WARM_MIBPS} MiBps for an on-demand "
                             f"stream. Requested warm throughput: {mibps} MiBps.")


def warm_throughput(stream: Stream) -> dict[str, int]:
    # Versions before the limit check stored any number (2^64 made every later DescribeStreamSummary
    # fail, even across restarts): a stored value is read as the nearest one AWS allows.
    target = stream.warm_throughput_mibps
    if isinstance(target, bool) or not isinstance(target, int):
        target = 0
    target = min(max(target, 0), MAX_WARM_MIBPS)
    return {"TargetMiBps": target, "CurrentMiBps": target}


def update_warm_throughput(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.active_stream(p)
    if stream.mode != "ON_DEMAND":
        raise invalid_argument(
            f"Warm throughput can only be configured for streams in ON_DEMAND mode. Stream {stream.name} "
            f"under account {svc.account} is in PROVISIONED mode.")
    check_warm_throughput(p["WarmThroughputMiBps"])
    with stream.lock:
        stream.warm_throughput_mibps = p["WarmThroughputMiBps"]
        svc.save(stream)
    return {"StreamARN": stream.arn, "StreamName": stream.name, "WarmThroughput": warm_throughput(stream)}


def distribution_needs_on_demand(svc: KinesisService, name: str) -> AwsError:
    """AWS: "Attempting to set AUTO on a provisioned stream results in an InvalidArgumentException"
    (UpdateStreamRecordDistributionStrategy's documentation). The text is ours, worded as
    UpdateStreamWarmThroughput's on-demand-only refusal."""
    return invalid_argument(
        f"Record distribution strategy can only be configured for streams in ON_DEMAND mode. Stream {name} "
        f"under account {svc.account} is in PROVISIONED mode.")


def update_distribution(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    """Takes effect at once, with no UPDATING state ("the change takes effect immediately without
    downtime"); records already stored keep their shards. The model names the stream by
    StreamARN only and gives the operation no output."""
    stream = svc.active_stream(p)
    with stream.lock:
        if stream.mode != "ON_DEMAND":
            raise distribution_needs_on_demand(svc, stream.name)
        stream.distribution = p["RecordDistributionStrategy"]
        stream.routing = None  # the put path's router follows the strategy
        svc.save(stream)
    return {}


def describe_account_settings(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    commitment = svc.account_settings.get("MinimumThroughputBillingCommitment", {"Status": "DISABLED"})
    return {"MinimumThroughputBillingCommitment": commitment}


def update_account_settings(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    status = p["MinimumThroughputBillingCommitment"]["Status"]
    commitment: dict[str, Any] = {"Status": status}
    if status == "ENABLED":
        commitment["StartedAt"] = time.time()
    else:
        previous = svc.account_settings.get("MinimumThroughputBillingCommitment", {})
        if "StartedAt" in previous:
            commitment["StartedAt"] = previous["StartedAt"]
            commitment["EndedAt"] = time.time()
    svc.account_settings["MinimumThroughputBillingCommitment"] = commitment
    svc.save_meta("account-settings", svc.account_settings)
    return {"MinimumThroughputBillingCommitment": commitment}
