"""The control plane: CreateDeliveryStream, DescribeDeliveryStream, ListDeliveryStreams,
DeleteDeliveryStream, UpdateDestination, tags, and server-side encryption.

Sources: DirectPut (PutRecord/PutRecordBatch) and KinesisStreamAsSource (a kinesim stream, read
by `firehose.source`). Destination: Amazon S3, in its extended form (ExtendedS3Destination*) or
the older S3Destination* form; both are stored as the extended description with AWS's defaults
filled in, and both descriptions are returned, as AWS does. kinesim has no Redshift, OpenSearch,
Splunk, HTTP endpoint, Snowflake or Iceberg destination and no MSK or database source: asking for
one is an InvalidArgumentException that says so.

Where AWS's exact text is not known to us, messages follow the wording of its known ones
("Firehose NAME under account ACCOUNT ...").
"""
from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kinesim.protocol.errors import AwsError, in_use, invalid_argument, limit_exceeded

from . import keys, partitioning
from .model import DeliveryStream

if TYPE_CHECKING:
    from .service import FirehoseService

DESTINATION_ID = "destinationId-000000000001"
MAX_DELIVERY_STREAMS = 5000     # AWS's default quota per account and region
MAX_TAGS = 50
MiB = 1 << 20

# Destination members of CreateDeliveryStream / UpdateDestination that kinesim does not emulate.
_OTHER_DESTINATIONS = ("Redshift", "Elasticsearch", "Amazonopensearchservice", "Splunk", "HttpEndpoint",
                       "AmazonOpenSearchServerless", "Snowflake", "Iceberg")
# Members an S3DestinationDescription shares with the extended description.
_S3_MEMBERS = ("RoleARN", "BucketARN", "Prefix", "ErrorOutputPrefix", "BufferingHints", "CompressionFormat",
               "EncryptionConfiguration", "CloudWatchLoggingOptions")


# destination configuration -> description

def _enabled(cfg: dict[str, Any] | None) -> bool:
    return bool(cfg and cfg.get("Enabled"))


def _fill_defaults(dest: dict[str, Any], extended: bool) -> dict[str, Any]:
    """AWS's defaults, as DescribeDeliveryStream shows them."""
    dynamic = extended and _enabled(dest.get("DynamicPartitioningConfiguration"))
    hints = dest.get("BufferingHints") or {}
    # Dynamic partitioning buffers 64 MiB by default (and at least 64 MiB, see `check_destination`).
    dest["BufferingHints"] = {"SizeInMBs": hints.get("SizeInMBs", 64 if dynamic else 5),
                              "IntervalInSeconds": hints.get("IntervalInSeconds", 300)}
    dest.setdefault("CompressionFormat", "UNCOMPRESSED")
    if not dest.get("EncryptionConfiguration"):
        dest["EncryptionConfiguration"] = {"NoEncryptionConfig": "NoEncryption"}
    if not dest.get("CloudWatchLoggingOptions"):
        dest["CloudWatchLoggingOptions"] = {"Enabled": False}
    if extended:
        dest.setdefault("S3BackupMode", "Disabled")
        if dynamic:
            dp = dest["DynamicPartitioningConfiguration"]
            dp["RetryOptions"] = {"DurationInSeconds": (dp.get("RetryOptions") or {}).get("DurationInSeconds", 300)}
        backup = dest.pop("S3BackupConfiguration", None) or dest.pop("S3BackupUpdate", None)
        if backup is not None:
            dest["S3BackupDescription"] = _fill_defaults({k: v for k, v in backup.items() if k in _S3_MEMBERS}, False)
    return dest


def destination_from_config(cfg: dict[str, Any], extended: bool) -> dict[str, Any]:
    dest = copy.deepcopy(cfg)
    if not extended:
        dest = {k: v for k, v in dest.items() if k in _S3_MEMBERS}
    return _fill_defaults(dest, True)


def apply_update(current: dict[str, Any], update: dict[str, Any], extended: bool) -> dict[str, Any]:
    """UpdateDestination: members given replace the current ones; BufferingHints merge member by
    member (AWS keeps current values for what an update leaves out)."""
    dest = copy.deepcopy(current)
    update = copy.deepcopy(update)
    if not extended:
        update = {k: v for k, v in update.items() if k in _S3_MEMBERS}
    hints = update.pop("BufferingHints", None)
    if hints:
        dest["BufferingHints"] = {**dest.get("BufferingHints", {}), **hints}
    backup = update.pop("S3BackupUpdate", None)
    if backup is not None:
        merged = {**dest.get("S3BackupDescription", {}), **{k: v for k, v in backup.items() if k in _S3_MEMBERS}}
        if backup.get("BufferingHints"):
            merged["BufferingHints"] = {**dest.get("S3BackupDescription", {}).get("BufferingHints", {}),
                                        **backup["BufferingHints"]}
        dest["S3BackupDescription"] = _fill_defaults(merged, False)
    dest.update(update)
    if "S3BackupDescription" in dest:
        dest["S3BackupDescription"] = _fill_defaults(dest["S3BackupDescription"], False)
    return _fill_defaults(dest, True)


def check_destination(svc: FirehoseService, dest: dict[str, Any]) -> None:
    """What AWS refuses in an S3 destination beyond the model's constraints."""
    dynamic = _enabled(dest.get("DynamicPartitioningConfiguration"))
    if dynamic and dest["BufferingHints"]["SizeInMBs"] < 64:
        raise invalid_argument("BufferingHints.SizeInMBs must be at least 64 when Dynamic Partitioning is enabled.")
    keys.validate_prefixes(dest.get("Prefix"), dest.get("ErrorOutputPrefix"), dynamic)
    if dest.get("S3BackupMode") == "Enabled" and "S3BackupDescription" not in dest:
        raise invalid_argument("S3BackupConfiguration must be specified when S3BackupMode is Enabled.")
    if "S3BackupDescription" in dest:
        keys.validate_backup_prefix(dest["S3BackupDescription"].get("Prefix"))
    partitioning.validate_processing(dest.get("Prefix"), dest.get("ProcessingConfiguration"), dynamic, svc.jq)
    if svc.objects is not None:
        _check_storable(svc.objects.key_problem, dest)
    zone = dest.get("CustomTimeZone")
    if zone:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise invalid_argument(f"CustomTimeZone {zone} is not a valid time zone.") from None
    conversion = dest.get("DataFormatConversionConfiguration")
    if _enabled(conversion) and dest.get("CompressionFormat") != "UNCOMPRESSED":
        raise invalid_argument("CompressionFormat must be UNCOMPRESSED when DataFormatConversion is enabled.")


def _check_storable(key_problem: Any, dest: dict[str, Any]) -> None:
    """Prefixes whose keys kinesim's object store could never hold (see `keys.check_storable`)."""
    prefix = dest.get("Prefix")
    keys.check_storable("Prefix", prefix, key_problem)
    keys.check_storable("ErrorOutputPrefix", keys.error_prefix_template(prefix, dest.get("ErrorOutputPrefix")),
                        key_problem, error_output_type=keys.ERROR_OUTPUT_TYPES[0])
    backup = dest.get("S3BackupDescription")
    if backup is not None:
        keys.check_storable("S3BackupConfiguration.Prefix", backup.get("Prefix"), key_problem)


def _one_destination(p: dict[str, Any], suffix: str) -> tuple[str, dict[str, Any]]:
    """The single destination member of a request: ("ExtendedS3" | "S3", its configuration)."""
    given = [(kind, p[kind + suffix]) for kind in ("ExtendedS3", "S3", *_OTHER_DESTINATIONS)
             if p.get(kind + suffix) is not None]
    if len(given) != 1:
        raise invalid_argument("Exactly one destination configuration is supported for a Firehose")
    kind, cfg = given[0]
    if kind not in ("ExtendedS3", "S3"):
        raise invalid_argument(f"{kind}{suffix} is not supported by kinesim: it delivers to Amazon S3 only "
                               "(ExtendedS3DestinationConfiguration or S3DestinationConfiguration).")
    return kind, cfg


def _source(svc: FirehoseService, p: dict[str, Any], kind: str, now: float) -> dict[str, Any] | None:
    cfg = p.get("KinesisStreamSourceConfiguration")
    if kind in ("MSKAsSource", "DatabaseAsSource"):
        raise invalid_argument(f"DeliveryStreamType {kind} is not supported by kinesim "
                               "(DirectPut and KinesisStreamAsSource are).")
    if cfg is not None and kind != "KinesisStreamAsSource":
        raise invalid_argument("KinesisSourceStreamConfig is only applicable for KinesisStreamAsSource stream type")
    if kind != "KinesisStreamAsSource":
        return None
    if cfg is None:
        raise invalid_argument("KinesisSourceStreamConfig is required for KinesisStreamAsSource stream type")
    if p.get("DeliveryStreamEncryptionConfigurationInput") is not None:
        raise invalid_argument("Server-side encryption is not supported for KinesisStreamAsSource delivery stream "
                               "type: enable it on the source Kinesis stream.")
    stream_name = cfg["KinesisStreamARN"].rsplit("/", 1)[-1]
    if cfg["KinesisStreamARN"] != svc.kinesis.stream_arn(stream_name) or svc.kinesis.find(stream_name) is None:
        raise invalid_argument(f"Stream {stream_name} under account {svc.account} not found.")
    return {"KinesisStreamARN": cfg["KinesisStreamARN"], "RoleARN": cfg["RoleARN"], "DeliveryStartTimestamp": now}


def _encryption_input(cfg: dict[str, Any] | None) -> dict[str, Any]:
    cfg = cfg or {"KeyType": "AWS_OWNED_CMK"}
    key_type, key_arn = cfg["KeyType"], cfg.get("KeyARN")
    if key_type == "CUSTOMER_MANAGED_CMK" and not key_arn:
        raise invalid_argument("KeyARN must be specified when KeyType is CUSTOMER_MANAGED_CMK.")
    if key_type == "AWS_OWNED_CMK" and key_arn:
        raise invalid_argument("KeyARN must not be specified when KeyType is AWS_OWNED_CMK.")
    out = {"KeyType": key_type, "Status": "ENABLED"}
    if key_arn:
        out["KeyARN"] = key_arn
    return out


def _tag_map(tags: list[dict[str, Any]]) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in tags}


def create_delivery_stream(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    name = p["DeliveryStreamName"]
    kind = p.get("DeliveryStreamType", "DirectPut")
    now = time.time()
    dest_kind, cfg = _one_destination(p, "DestinationConfiguration")
    dest = destination_from_config(cfg, dest_kind == "ExtendedS3")
    check_destination(svc, dest)
    tags = _tag_map(p.get("Tags") or [])
    with svc.lock:
        if svc.find(name) is not None:
            raise in_use(f"Firehose {name} under accountId {svc.account} already exists")
        if len(svc.streams) >= MAX_DELIVERY_STREAMS:
            raise limit_exceeded(f"You have already consumed your firehose quota of {MAX_DELIVERY_STREAMS} hoses.")
        source = _source(svc, p, kind, now)
        ds = DeliveryStream(name=name, arn=svc.arn(name), type=kind, created=now, destination=dest,
                            source=source, tags=tags)
        if p.get("DeliveryStreamEncryptionConfigurationInput") is not None:
            ds.encryption = _encryption_input(p["DeliveryStreamEncryptionConfigurationInput"])
        svc.begin(ds, "CREATING", svc.settings.create_stream_ms)
        svc.streams[name] = ds
        svc.save(ds)
        svc.deliveries.start(ds)
    return {"DeliveryStreamARN": ds.arn}


def describe(ds: DeliveryStream) -> dict[str, Any]:
    out: dict[str, Any] = {
        "DeliveryStreamName": ds.name,
        "DeliveryStreamARN": ds.arn,
        "DeliveryStreamStatus": ds.status,
        "DeliveryStreamType": ds.type,
        "VersionId": str(ds.version),
        "CreateTimestamp": ds.created,
    }
    # AWS describes server-side encryption only where it can be had: not for a Kinesis source
    # (recorded: LocalStack's test_firehose_stack_with_kinesis_as_source snapshot has none).
    if ds.type != "KinesisStreamAsSource":
        out["DeliveryStreamEncryptionConfiguration"] = dict(ds.encryption)
    if ds.updated is not None:
        out["LastUpdateTimestamp"] = ds.updated
    if ds.source is not None:
        out["Source"] = {"KinesisStreamSourceDescription": dict(ds.source)}
    extended = copy.deepcopy(ds.destination)
    out["Destinations"] = [{
        "DestinationId": DESTINATION_ID,
        "S3DestinationDescription": {k: v for k, v in extended.items() if k in _S3_MEMBERS},
        "ExtendedS3DestinationDescription": extended,
    }]
    out["HasMoreDestinations"] = False
    return out


def describe_delivery_stream(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    ds = svc.stream(p["DeliveryStreamName"])
    with ds.lock:
        out = describe(ds)
    # One destination per delivery stream: starting after it leaves none.
    if p.get("ExclusiveStartDestinationId") is not None and p["ExclusiveStartDestinationId"] >= DESTINATION_ID:
        out["Destinations"] = []
    return {"DeliveryStreamDescription": out}


def list_delivery_streams(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    limit = p.get("Limit", 10)
    kind, start = p.get("DeliveryStreamType"), p.get("ExclusiveStartDeliveryStreamName")
    names = sorted(ds.name for ds in svc.all_streams() if kind is None or ds.type == kind)
    if start is not None:
        names = [n for n in names if n > start]
    return {"DeliveryStreamNames": names[:limit], "HasMoreDeliveryStreams": len(names) > limit}


def delete_delivery_stream(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    ds = svc.stream(p["DeliveryStreamName"])
    with ds.lock:
        if ds.status == "CREATING":
            raise in_use(f"Firehose {ds.name} under account {svc.account} is in CREATING state and cannot be "
                         "deleted. Retry after it becomes ACTIVE.")
        if ds.status == "DELETING":
            return {}
        svc.begin(ds, "DELETING", svc.settings.delete_stream_ms)
        svc.save(ds)
    svc.deliveries.stop(ds.name)  # outside the lock: the worker may be waiting for it
    svc.find(ds.name)  # a zero delay deletes at once
    return {}


def active(svc: FirehoseService, name: str) -> DeliveryStream:
    ds = svc.stream(name)
    if ds.status != "ACTIVE":
        raise in_use(f"Firehose {name} under account {svc.account} is not ACTIVE, instead in state {ds.status}.")
    return ds


def _check_version(ds: DeliveryStream, p: dict[str, Any]) -> None:
    if p["CurrentDeliveryStreamVersionId"] != str(ds.version):
        raise AwsError("ConcurrentModificationException",
                       f"Cannot update firehose: {ds.name} since the current version id: {ds.version} and "
                       f"specified version id: {p['CurrentDeliveryStreamVersionId']} do not match")


def update_destination(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    ds = active(svc, p["DeliveryStreamName"])
    dest_kind, update = _one_destination(p, "DestinationUpdate")
    with ds.lock:
        _check_version(ds, p)
        if p["DestinationId"] != DESTINATION_ID:
            raise invalid_argument(f"Destination Id {p['DestinationId']} not found")
        dest = apply_update(ds.destination, update, dest_kind == "ExtendedS3")
    # Outside the lock: the check may run the MetadataExtractionQuery in a jq worker, and the
    # stream's delivery takes this lock for every flush.
    check_destination(svc, dest)
    with ds.lock:
        _check_version(ds, p)  # another update may have been applied meanwhile
        ds.destination = dest
        ds.version += 1
        ds.updated = time.time()
        svc.save(ds)
    svc.deliveries.wake(ds.name)
    return {}


# tags

def tag_delivery_stream(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    ds = svc.stream(p["DeliveryStreamName"])
    new = _tag_map(p["Tags"])
    with ds.lock:
        merged = {**ds.tags, **new}
        if len(merged) > MAX_TAGS:
            raise limit_exceeded(f"Firehose {ds.name} under account {svc.account} can have at most {MAX_TAGS} tags; "
                                 f"this request would make {len(merged)}.")
        ds.tags = merged
        svc.save(ds)
    return {}


def untag_delivery_stream(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    ds = svc.stream(p["DeliveryStreamName"])
    with ds.lock:
        ds.tags = {k: v for k, v in ds.tags.items() if k not in set(p["TagKeys"])}
        svc.save(ds)
    return {}


def list_tags_for_delivery_stream(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    ds = svc.stream(p["DeliveryStreamName"])
    limit, start = p.get("Limit", 50), p.get("ExclusiveStartTagKey")
    keys = sorted(k for k in ds.tags if start is None or k > start)
    return {"Tags": [{"Key": k, "Value": ds.tags[k]} for k in keys[:limit]], "HasMoreTags": len(keys) > limit}


# server-side encryption of the buffered data (DirectPut only)

def _encryptable(svc: FirehoseService, name: str) -> DeliveryStream:
    ds = active(svc, name)
    if ds.type == "KinesisStreamAsSource":
        raise invalid_argument("This operation is not permitted on KinesisStreamAsSource delivery stream type.")
    return ds


def start_delivery_stream_encryption(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    ds = _encryptable(svc, p["DeliveryStreamName"])
    encryption = _encryption_input(p.get("DeliveryStreamEncryptionConfigurationInput"))
    with ds.lock:
        ds.encryption = encryption
        svc.save(ds)
    return {}


def stop_delivery_stream_encryption(svc: FirehoseService, p: dict[str, Any]) -> dict[str, Any]:
    ds = _encryptable(svc, p["DeliveryStreamName"])
    with ds.lock:
        ds.encryption = {"Status": "DISABLED"}
        svc.save(ds)
    return {}
