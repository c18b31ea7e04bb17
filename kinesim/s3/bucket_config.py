"""A bucket's configurations as S3 keeps them: CORS, lifecycle, policy, default encryption, public
access block, tags, object ownership and versioning; each a document in the shape of boto3's
parameters (`bucket_config_xml` turns them into S3's XML), checked as S3 checks them, and kept in
the bucket's record in the object store (so they survive a restart and go with the bucket).

What a new bucket has: since January 2023 (default SSE-S3) and April 2023 (ownership and public
access defaults) every new S3 bucket has default encryption AES256 with BucketKeyEnabled false,
ObjectOwnership BucketOwnerEnforced and all four public access blocks on; a bucket whose
configuration was never changed answers with those (recorded AWS answers: LocalStack's
tests/aws/services/s3/test_s3_api.snapshot.json, test_s3_default_bucket_encryption,
test_crud_bucket_ownership_controls, test_crud_public_access_block).

Which configurations act here: lifecycle expiration and AbortIncompleteMultipartUpload
(`lifecycle_sweep` applies them), default encryption (objects are answered with the
`x-amz-server-side-encryption` it names; the bytes on disk are not encrypted). CORS, policies,
public access blocks and ownership controls are recorded and returned only: kinesim checks no
permissions, and which web origins may call it is its own guard's decision (`guard.py`).
"""
from __future__ import annotations

import base64
import copy
import json
import re
import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .errors import S3Error, invalid_argument, invalid_request, malformed_xml

if TYPE_CHECKING:
    from .objects import ObjectStore

CORS, LIFECYCLE, POLICY, ENCRYPTION = "cors", "lifecycle", "policy", "encryption"
PUBLIC_ACCESS_BLOCK, TAGGING, OWNERSHIP, VERSIONING = "publicAccessBlock", "tagging", "ownershipControls", "versioning"

DEFAULT_ENCRYPTION = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"},
                                 "BucketKeyEnabled": False}]}
PUBLIC_ACCESS_FIELDS = ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets")
DEFAULTS: dict[str, Any] = {
    ENCRYPTION: DEFAULT_ENCRYPTION,
    OWNERSHIP: {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
    PUBLIC_ACCESS_BLOCK: {name: True for name in PUBLIC_ACCESS_FIELDS},
}
OBJECT_OWNERSHIPS = ("BucketOwnerPreferred", "ObjectWriter", "BucketOwnerEnforced")
CORS_METHODS = ("GET", "PUT", "HEAD", "POST", "DELETE")
MAX_CORS_RULES = 100
MAX_LIFECYCLE_RULES = 1000
MAX_RULE_ID = 255
# S3's character set for tag keys and values (letters, digits, spaces and + - = . _ : / @).
_TAG_TEXT = re.compile(r"[\w\s.:/=+\-@]*")

# What each "not configured" Get answers (recorded AWS answers: LocalStack's s3 snapshots). Default
# encryption is never missing (DeleteBucketEncryption restores SSE-S3), so S3's
# ServerSideEncryptionConfigurationNotFoundError is no longer answered.
_MISSING = {
    CORS: ("NoSuchCORSConfiguration", "The CORS configuration does not exist"),
    LIFECYCLE: ("NoSuchLifecycleConfiguration", "The lifecycle configuration does not exist"),
    POLICY: ("NoSuchBucketPolicy", "The bucket policy does not exist"),
    PUBLIC_ACCESS_BLOCK: ("NoSuchPublicAccessBlockConfiguration",
                          "The public access block configuration was not found"),
    TAGGING: ("NoSuchTagSet", "The TagSet does not exist"),
    OWNERSHIP: ("OwnershipControlsNotFoundError", "The bucket ownership controls were not found"),
}


# ---------------------------------------------------------------------------------------------
# kept with the bucket


def configuration(store: "ObjectStore", bucket: str) -> dict[str, Any]:
    """All of the bucket's configurations by kind (a new bucket's defaults included). NoSuchBucket."""
    stored = store.bucket_configuration(bucket)
    return copy.deepcopy(DEFAULTS) if stored is None else stored


def find(store: "ObjectStore", bucket: str, kind: str) -> Any | None:
    return configuration(store, bucket).get(kind)


def get(store: "ObjectStore", bucket: str, kind: str) -> Any:
    """The configuration of `kind`, or S3's 404 for a bucket without one."""
    value = find(store, bucket, kind)
    if value is None:
        code, message = _MISSING[kind]
        raise S3Error(code, message, 404, BucketName=bucket)
    return value


def put(store: "ObjectStore", bucket: str, kind: str, value: Any) -> None:
    def change(current: dict | None) -> dict:
        updated = copy.deepcopy(DEFAULTS) if current is None else current
        if value is None:
            updated.pop(kind, None)
        else:
            updated[kind] = value
        return updated
    store.update_bucket_configuration(bucket, change)


def delete(store: "ObjectStore", bucket: str, kind: str) -> None:
    # DeleteBucketEncryption puts the default back: a bucket is never unencrypted since 2023
    # (AWS's DeleteBucketEncryption reference: "resets the default encryption ... (SSE-S3)").
    put(store, bucket, kind, DEFAULT_ENCRYPTION if kind == ENCRYPTION else None)


# ---------------------------------------------------------------------------------------------
# S3's checks of each document (after `bucket_config_xml.read` checked it against the model)


def check_cors(doc: dict[str, Any]) -> dict[str, Any]:
    rules = doc.get("CORSRules") or []
    if not rules or len(rules) > MAX_CORS_RULES:
        raise malformed_xml()
    for rule in rules:
        for method in rule["AllowedMethods"]:
            if method not in CORS_METHODS:
                raise invalid_request(f"Found unsupported HTTP method in CORS config. Unsupported method is {method}")
    return doc


def check_lifecycle(doc: dict[str, Any]) -> dict[str, Any]:
    rules = doc.get("Rules") or []
    if not rules or len(rules) > MAX_LIFECYCLE_RULES:
        raise malformed_xml()
    seen: set[str] = set()
    for rule in rules:
        _check_rule(rule)
        if rule["ID"] in seen:
            raise invalid_argument("Rule ID must be unique. Found same ID for more than one rule", "ID", rule["ID"])
        seen.add(rule["ID"])
    return doc


def _check_rule(rule: dict[str, Any]) -> None:
    # One of Filter and the older top-level Prefix; a Filter holds at most one condition
    # (several go in And); recorded answers: test_put_bucket_lifecycle_conf_exc.
    if ("Filter" in rule) == ("Prefix" in rule):
        raise malformed_xml()
    if len(rule.get("Filter") or {}) > 1:
        raise malformed_xml()
    if "ID" not in rule:
        rule["ID"] = base64.b64encode(str(uuid.uuid4()).encode()).decode()  # S3 names a rule given none
    elif len(rule["ID"]) > MAX_RULE_ID:
        raise invalid_argument("ID length should not exceed allowed limit of 255", "ID", rule["ID"])
    actions = ("Expiration", "Transitions", "NoncurrentVersionExpiration", "NoncurrentVersionTransitions",
               "AbortIncompleteMultipartUpload")
    if not any(a in rule for a in actions):
        raise invalid_request("At least one action needs to be specified in a rule")
    expiration = rule.get("Expiration")
    if expiration is not None:
        if len(expiration) != 1:  # one of Days, Date and ExpiredObjectDeleteMarker
            raise malformed_xml()
        if "Days" in expiration and expiration["Days"] <= 0:
            raise invalid_argument("'Days' for Expiration action must be a positive integer", "Days",
                                   expiration["Days"])
        if "Date" in expiration and not expiration["Date"].endswith("T00:00:00.000Z"):
            raise invalid_argument("'Date' must be at midnight GMT", "Date", expiration["Date"])
    noncurrent = rule.get("NoncurrentVersionExpiration")
    if noncurrent is not None and "NoncurrentDays" not in noncurrent and "NewerNoncurrentVersions" not in noncurrent:
        raise malformed_xml()
    abort = rule.get("AbortIncompleteMultipartUpload")
    if abort is not None and abort.get("DaysAfterInitiation", 0) <= 0:
        raise invalid_argument("'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive "
                               "integer", "DaysAfterInitiation", abort.get("DaysAfterInitiation"))
    tags = ((rule.get("Filter") or {}).get("And") or {}).get("Tags") or []
    keys = [t["Key"] for t in tags]
    if len(keys) != len(set(keys)):
        raise invalid_request("Duplicate Tag Keys are not allowed.")


def check_encryption(doc: dict[str, Any]) -> dict[str, Any]:
    rules = doc.get("Rules") or []
    if len(rules) != 1 or "ApplyServerSideEncryptionByDefault" not in rules[0]:
        raise malformed_xml()
    default = rules[0]["ApplyServerSideEncryptionByDefault"]
    if "KMSMasterKeyID" in default and default["SSEAlgorithm"] not in ("aws:kms", "aws:kms:dsse"):
        raise invalid_argument("a KMSMasterKeyID is not applicable if the default sse algorithm is not aws:kms or "
                               "aws:kms:dsse", "ApplyServerSideEncryptionByDefault")
    rules[0].setdefault("BucketKeyEnabled", False)
    return doc


def check_public_access_block(doc: dict[str, Any]) -> dict[str, Any]:
    if not doc:
        raise malformed_xml()
    return {name: bool(doc.get(name, False)) for name in PUBLIC_ACCESS_FIELDS}  # what is left out is off


def check_ownership(doc: dict[str, Any]) -> dict[str, Any]:
    rules = doc.get("Rules") or []
    if len(rules) != 1 or "ObjectOwnership" not in rules[0]:
        raise malformed_xml()
    return doc


def check_tagging(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The tag set, or None for an empty one (which deletes the tags, as S3 does)."""
    keys: set[str] = set()
    for tag in doc.get("TagSet") or []:
        key, value = tag["Key"], tag["Value"]
        if key in keys:
            raise S3Error("InvalidTag", "Cannot provide multiple Tags with the same key", 400, TagKey=key)
        if key.startswith("aws:"):
            raise S3Error("InvalidTag", "System tags cannot be added/updated by requester", 400, TagKey=key)
        if not _TAG_TEXT.fullmatch(key) or not key or len(key) > 128:
            raise S3Error("InvalidTag", "The TagKey you have provided is invalid", 400, TagKey=key)
        if not _TAG_TEXT.fullmatch(value) or len(value) > 256:
            raise S3Error("InvalidTag", "The TagValue you have provided is invalid", 400, TagKey=key, TagValue=value)
        keys.add(key)
    return doc if keys else None


def check_versioning(doc: dict[str, Any]) -> dict[str, Any]:
    if "Status" not in doc:
        raise S3Error("IllegalVersioningConfigurationException", "The Versioning element must be specified", 400)
    return doc


def check_policy(text: str) -> str:
    # Recorded AWS answers: test_bucket_policy_exc (empty, not JSON, "{}").
    if not text.startswith("{"):
        raise S3Error("MalformedPolicy", "Policies must be valid JSON and the first byte must be '{'", 400)
    try:
        policy = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than any policy
        raise S3Error("MalformedPolicy", "Policies must be valid JSON and the first byte must be '{'", 400) from None
    if not isinstance(policy, dict) or "Statement" not in policy:
        raise S3Error("MalformedPolicy", "Missing required field Statement", 400)
    return text


# Condition keys that, with fixed values, make a statement for everyone not public (AWS's "The
# meaning of public": PublicAccessBlockConfiguration's reference).
_NARROWING_KEYS = frozenset(k.lower() for k in (
    "aws:SourceIp", "aws:SourceArn", "aws:SourceVpc", "aws:SourceVpce", "aws:SourceOwner", "aws:SourceAccount",
    "s3:x-amz-server-side-encryption-aws-kms-key-id", "aws:userid"))
_EVERYWHERE = ("0.0.0.0/0", "::/0")


def policy_is_public(text: str) -> bool:
    """Whether S3 counts the policy public (GetBucketPolicyStatus' IsPublic, what BlockPublicPolicy
    refuses): an Allow for every principal ("*"), or for all but some (NotPrincipal), unless a
    condition pins it to fixed values of a narrowing key (a CIDR other than everywhere for
    aws:SourceIp; an ARN, VPC, account, ... without wildcards for the others)."""
    statements = json.loads(text).get("Statement")
    for statement in statements if isinstance(statements, list) else [statements]:
        if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
            continue
        if ("NotPrincipal" in statement or _everyone(statement.get("Principal"))) \
                and not _narrowed(statement.get("Condition")):
            return True
    return False


def _everyone(principal: Any) -> bool:
    if isinstance(principal, dict):
        return any("*" in _as_list(value) for value in principal.values())
    return "*" in _as_list(principal)


def _narrowed(condition: Any) -> bool:
    if not isinstance(condition, dict):
        return False
    for operator, tests in condition.items():
        if not isinstance(tests, dict) or str(operator).startswith(("Not", "StringNot", "ArnNot")):
            continue
        for key, values in tests.items():
            values = _as_list(values)
            if str(key).lower() not in _NARROWING_KEYS or not values or not all(isinstance(v, str) for v in values):
                continue
            if str(key).lower() == "aws:sourceip":
                if not any(v in _EVERYWHERE for v in values):
                    return True
            elif not any("*" in v or "?" in v for v in values):
                return True
    return False


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


# ---------------------------------------------------------------------------------------------
# what objects get from them


SSE_ALGORITHMS = ("AES256", "aws:kms", "aws:kms:dsse")


def encryption_headers(store: "ObjectStore", bucket: str, requested: str | None = None,
                       key_id: str | None = None) -> dict[str, str]:
    """The encryption headers S3 records for an object written now and answers with: what the
    request asked for (`x-amz-server-side-encryption`, its KMS key id), else the bucket's default
    encryption (AES256 unless configured otherwise)."""
    if requested is not None:
        if requested not in SSE_ALGORITHMS:
            raise invalid_argument("The encryption method specified is not supported",
                                   "x-amz-server-side-encryption", requested)
        headers = {"x-amz-server-side-encryption": requested}
        if key_id and requested != "AES256":
            headers["x-amz-server-side-encryption-aws-kms-key-id"] = key_id
        return headers
    rules = (find(store, bucket, ENCRYPTION) or DEFAULT_ENCRYPTION)["Rules"]
    default = rules[0]["ApplyServerSideEncryptionByDefault"]
    headers = {"x-amz-server-side-encryption": default["SSEAlgorithm"]}
    if default["SSEAlgorithm"] != "AES256":
        if "KMSMasterKeyID" in default:
            headers["x-amz-server-side-encryption-aws-kms-key-id"] = default["KMSMasterKeyID"]
        if rules[0].get("BucketKeyEnabled"):
            headers["x-amz-server-side-encryption-bucket-key-enabled"] = "true"
    return headers


def matches(rule: dict[str, Any], key: str, size: int) -> bool:
    """Whether an enabled lifecycle rule's filter takes the object (kinesim keeps no object tags,
    so a rule that filters on tags takes none)."""
    if rule.get("Status") != "Enabled":
        return False
    if "Prefix" in rule:
        return key.startswith(rule["Prefix"])
    conditions = rule.get("Filter") or {}
    conditions = conditions.get("And", conditions)
    if conditions.get("Tags") or conditions.get("Tag"):
        return False
    return (key.startswith(conditions.get("Prefix", ""))
            and size > conditions.get("ObjectSizeGreaterThan", -1)
            and ("ObjectSizeLessThan" not in conditions or size < conditions["ObjectSizeLessThan"]))


def expiry(rule: dict[str, Any], created: float) -> float | None:
    """When the rule expires an object created at `created` (epoch seconds), None if it does not:
    creation time plus the days, rounded up to the next midnight UTC, as S3 computes it; or the
    rule's date."""
    expiration = rule.get("Expiration") or {}
    if "Date" in expiration:
        return datetime.fromisoformat(expiration["Date"].replace("Z", "+00:00")).timestamp()
    if "Days" in expiration:
        return after_days(created, expiration["Days"])
    return None


def after_days(start: float, days: int) -> float:
    """`start` plus `days` days, rounded up to the next midnight UTC (S3's lifecycle arithmetic)."""
    day = 86400
    return (int(start + days * day) // day + 1) * day


def expiration_header(store: "ObjectStore", bucket: str, key: str, size: int, created: float) -> str | None:
    """`x-amz-expiration` of an object: when the soonest lifecycle rule that takes it expires it,
    and which rule (S3 sends it with PutObject, GetObject and HeadObject)."""
    rules = (find(store, bucket, LIFECYCLE) or {}).get("Rules") or []
    due = [(when, rule["ID"]) for rule in rules
           if matches(rule, key, size) and (when := expiry(rule, created)) is not None]
    if not due:
        return None
    when, rule_id = min(due)
    return f'expiry-date="{http_date_of(when)}", rule-id="{rule_id}"'


def http_date_of(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
