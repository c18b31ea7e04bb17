"""A bucket's notification configuration (`?notification`): read from S3's XML, checked as S3
checks it, written back as GetBucketNotificationConfiguration answers it.

The configuration is kept in botocore's output shape, the one boto3 users see:
`{"TopicConfigurations": [...], "QueueConfigurations": [...], "LambdaFunctionConfigurations": [...]}`,
each entry `{"Id", "<Kind>Arn", "Events": [...], "Filter": {"Key": {"FilterRules": [{"Name", "Value"}]}}}`.
On the wire (botocore's s3 model) the entries are `<TopicConfiguration>` / `<QueueConfiguration>` /
`<CloudFunctionConfiguration>` with the ARN in `<Topic>` / `<Queue>` / `<CloudFunction>`, events
flattened as `<Event>`, and `<Filter><S3Key><FilterRule>`. The deprecated PutBucketNotification
sends the same element names, so one reader takes both.

Checks that need only the document are here; whether a destination exists is the caller's
(`notifications.py`), after these pass, as S3 does: an ARN that cannot be parsed is named alone
(`ArgumentName`), destinations that do not answer are named together (`ArgumentName1`, ...), as
LocalStack's recordings of S3 show (tests/aws/services/s3/test_s3_notifications_sqs.snapshot.json,
`test_multiple_invalid_sqs_arns`).
"""
from __future__ import annotations

import base64
import functools
import re
import uuid
from dataclasses import dataclass
from typing import Any, Iterator
from xml.etree import ElementTree as ET

from ..protocol.models import service_model
from .errors import S3Error, invalid_argument, malformed_xml
from .exchange import not_implemented
from .xmldoc import document, element


@dataclass(frozen=True)
class Kind:
    """One destination type: its key in botocore's shape, its XML element, its ARN's service."""
    key: str          # "QueueConfigurations"
    arn_key: str      # "QueueArn"
    element: str      # "QueueConfiguration"
    arn_element: str  # "Queue" (also S3's ArgumentName when the ARN is bad)
    service: str      # "sqs"


# In the order of botocore's NotificationConfiguration shape (and of S3's answers).
KINDS = (Kind("TopicConfigurations", "TopicArn", "TopicConfiguration", "Topic", "sns"),
         Kind("QueueConfigurations", "QueueArn", "QueueConfiguration", "Queue", "sqs"),
         Kind("LambdaFunctionConfigurations", "LambdaFunctionArn", "CloudFunctionConfiguration", "CloudFunction",
              "lambda"))
_BY_ELEMENT = {k.element: k for k in KINDS}
MAX_FILTER_VALUE = 1024  # bytes of UTF-8
# S3's cap on a bucket's configurations (its message as another emulator held to S3 records it;
# no AWS page states it). Checked before anything else: overlaps are compared pairwise.
MAX_CONFIGURATIONS = 100
# arn:partition:service:region:account:resource
_ARN = re.compile(r"arn:(aws[a-zA-Z-]*):([a-z0-9-]+):([a-z0-9-]*):(\d{12})?:(.+)", re.S)


@functools.cache
def event_names() -> frozenset[str]:
    """Every event name S3 accepts in a configuration (botocore's `Event` enum), including those
    kinesim never emits (restores, replication, lifecycle, tagging, ACLs)."""
    model = service_model("s3")
    return frozenset(model.shape_for("Event").enum)


def entries(config: dict[str, Any]) -> Iterator[tuple[Kind, dict[str, Any]]]:
    for kind in KINDS:
        for entry in config.get(kind.key, []):
            yield kind, entry


def arn_parts(arn: str) -> tuple[str, str, str, str, str] | None:
    """(partition, service, region, account, resource) of an ARN, None if it is not one."""
    m = _ARN.fullmatch(arn)
    return m.groups() if m else None  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# reading


def parse(root: ET.Element) -> dict[str, Any]:
    """The configuration a request body holds, in botocore's shape; MalformedXML for a document
    S3's schema refuses (no ARN, no event, a filter rule without its name or value)."""
    if root.tag not in ("NotificationConfiguration",):
        raise malformed_xml()
    config: dict[str, Any] = {}
    for node in root:
        if node.tag == "EventBridgeConfiguration":
            # kinesim serves no EventBridge: accepting it would promise events that never come.
            raise not_implemented("EventBridgeConfiguration")
        kind = _BY_ELEMENT.get(node.tag)
        if kind is None:
            raise malformed_xml()
        config.setdefault(kind.key, []).append(_entry(kind, node))
        if sum(map(len, config.values())) > MAX_CONFIGURATIONS:
            raise S3Error("InvalidRequest", "Too many configurations submitted. The maximum number of configurations "
                          f"is {MAX_CONFIGURATIONS}", 400)
    return config


def _text(node: ET.Element, tag: str) -> str | None:
    child = node.find(tag)
    return None if child is None else (child.text or "")


def _entry(kind: Kind, node: ET.Element) -> dict[str, Any]:
    arn = _text(node, kind.arn_element)
    events = [e.text or "" for e in node.findall("Event")]
    if arn is None or not events:
        raise malformed_xml()
    entry: dict[str, Any] = {"Id": _text(node, "Id") or "", kind.arn_key: arn.strip(), "Events": events}
    rules = []
    for rule in node.findall("Filter/S3Key/FilterRule"):
        name, value = _text(rule, "Name"), _text(rule, "Value")
        if name is None or value is None:
            raise malformed_xml()
        rules.append({"Name": name, "Value": value})
    if rules:
        entry["Filter"] = {"Key": {"FilterRules": rules}}
    return entry


# ---------------------------------------------------------------------------------------------
# checking


def check(config: dict[str, Any]) -> None:
    """S3's checks of the document alone, in its order: each entry's ARN, events and filter rules,
    then Ids (missing ones generated), then overlaps between entries. Fills in missing Ids."""
    for kind, entry in entries(config):
        _check_arn(kind, entry[kind.arn_key])
        for event in entry["Events"]:
            if event not in event_names():
                raise invalid_argument("The event is not supported for notifications", "Event", event)
        _check_rules(entry)
    seen: set[str] = set()
    for _, entry in entries(config):
        if not entry["Id"]:
            # S3 names a configuration given without an Id with a base64-encoded UUID.
            entry["Id"] = base64.b64encode(str(uuid.uuid4()).encode()).decode()
        if entry["Id"] in seen:
            raise invalid_argument("Same ID used for multiple configurations. IDs must be unique.")
        seen.add(entry["Id"])
    _check_overlaps([entry for _, entry in entries(config)])


def _check_arn(kind: Kind, arn: str) -> None:
    parts = arn_parts(arn)
    if parts is None or parts[1] != kind.service or not parts[2] or not parts[3]:
        # S3's answer (LocalStack's recordings: test_invalid_sqs_arn, test_invalid_topic_arn,
        # test_invalid_lambda_arn): the element's name as ArgumentName.
        raise invalid_argument("The ARN could not be parsed", kind.arn_element, arn)


def _check_rules(entry: dict[str, Any]) -> None:
    seen: set[str] = set()
    for rule in rules_of(entry):
        name = rule["Name"].lower()
        if name not in ("prefix", "suffix"):
            raise invalid_argument("filter rule name must be either prefix or suffix", "FilterRule.Name", rule["Name"])
        if name in seen:
            raise invalid_argument(f"Cannot specify more than one {name} rule in a filter.", "FilterRule.Name",
                                   rule["Name"])
        seen.add(name)
        if len(rule["Value"].encode("utf-8", "surrogatepass")) > MAX_FILTER_VALUE:
            raise invalid_argument("Size of filter rule value cannot exceed 1024 bytes in UTF-8 representation",
                                   "FilterRule.Value", rule["Value"])
        rule["Name"] = name.capitalize()  # S3 answers "Prefix" / "Suffix" whatever the case sent


def rules_of(entry: dict[str, Any]) -> list[dict[str, str]]:
    return entry.get("Filter", {}).get("Key", {}).get("FilterRules", [])


def filter_values(entry: dict[str, Any]) -> tuple[str, str]:
    """(prefix, suffix) of an entry's filter ("" for a missing rule, which matches every key)."""
    values = {rule["Name"].lower(): rule["Value"] for rule in rules_of(entry)}
    return values.get("prefix", ""), values.get("suffix", "")


def events_overlap(a: str, b: str) -> bool:
    """Whether two event names (either may be a `:*` wildcard) have an event in common."""
    if a == b:
        return True
    return (a.endswith(":*") and b.startswith(a[:-1])) or (b.endswith(":*") and a.startswith(b[:-1]))


def _check_overlaps(all_entries: list[dict[str, Any]]) -> None:
    """S3 refuses two configurations that could both take one event of one key: a common event
    type and filters that can match a common key (one prefix starts the other, one suffix ends
    the other). Messages as S3 words them (minio issue 2472 quotes S3's XML for the first,
    with both events as ArgumentValue; the second is S3's text as users report it)."""
    for i, entry in enumerate(all_entries):
        prefix, suffix = filter_values(entry)
        for other in all_entries[:i]:
            # (as sets: an entry may repeat an event; there are fewer than 30 distinct ones)
            common = [(a, b) for a in dict.fromkeys(other["Events"]) for b in dict.fromkeys(entry["Events"])
                      if events_overlap(a, b)]
            if not common:
                continue
            other_prefix, other_suffix = filter_values(other)
            if not (prefix.startswith(other_prefix) or other_prefix.startswith(prefix)):
                continue
            if not (suffix.endswith(other_suffix) or other_suffix.endswith(suffix)):
                continue
            if not rules_of(entry) and not rules_of(other):
                raise invalid_argument("Configurations overlap. Configurations on the same bucket cannot share a "
                                       "common event type.", "Event", ", ".join(common[0]))
            raise invalid_argument("Configuration is ambiguously defined. Cannot have overlapping suffixes in two "
                                   "rules if the prefixes are overlapping for the same event type.", "Event",
                                   ", ".join(common[0]))


def matches(entry: dict[str, Any], event_name: str, key: str) -> bool:
    """Whether an event (`ObjectCreated:Put`, without "s3:") of `key` is one this entry takes."""
    name = "s3:" + event_name
    if not any(events_overlap(subscribed, name) for subscribed in entry["Events"]):
        return False
    prefix, suffix = filter_values(entry)
    return key.startswith(prefix) and key.endswith(suffix)


# ---------------------------------------------------------------------------------------------
# answering


def render(config: dict[str, Any]) -> ET.Element:
    """GetBucketNotificationConfiguration's document (an empty `<NotificationConfiguration/>`
    when the bucket has none)."""
    root = document("NotificationConfiguration")
    for kind, entry in entries(config):
        node = element(root, kind.element)
        element(node, "Id", entry["Id"])
        element(node, kind.arn_element, entry[kind.arn_key])
        for event in entry["Events"]:
            element(node, "Event", event)
        if rules_of(entry):
            s3key = element(element(node, "Filter"), "S3Key")
            for rule in rules_of(entry):
                node_rule = element(s3key, "FilterRule")
                element(node_rule, "Name", rule["Name"])
                element(node_rule, "Value", rule["Value"])
    return root


def destination_error(failures: list[tuple[str, str]]) -> S3Error:
    """S3's answer when destinations cannot be validated: each one numbered (LocalStack's
    recordings: `ArgumentName1` the ARN, `ArgumentValue1` the reason)."""
    details: dict[str, str] = {}
    for n, (name, reason) in enumerate(failures, 1):
        details[f"ArgumentName{n}"] = name
        details[f"ArgumentValue{n}"] = reason
    return S3Error("InvalidArgument", "Unable to validate the following destination configurations", 400, **details)
