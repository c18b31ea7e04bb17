"""PutParameter, GetParameter(s), DeleteParameter(s), GetParameterHistory.

Texts without a recording of AWS are moto's (its SSM backend copies AWS's sentences), marked so.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kinesim.protocol import java_regex
from kinesim.protocol.errors import AwsError

from . import names, views
from .errors import parameter_not_found, validation, version_not_found
from .paging import page

if TYPE_CHECKING:
    from .service import SsmService

MAX_VERSIONS = 100  # Parameter Store keeps the last 100 versions of a parameter
MAX_VALUE = 32768  # the service's limit on any value, before the tiers' own
TIER_LIMITS = {"Standard": 4096, "Advanced": 8192}
DATA_TYPES = ("text", "aws:ec2:image", "aws:ssm:integration")
ADVANCED_DOC = "https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-advanced-parameters.html"


def _now() -> float:
    return round(time.time(), 3)


def _check_value(value: str) -> None:
    # AWS does not echo a sensitive member's value in a constraint message (a user's log of
    # PutParameter: "1 validation error detected: Value at 'value' failed to satisfy constraint:
    # Member must have length less than or equal to 32768").
    if len(value) > MAX_VALUE:
        raise validation("1 validation error detected: Value at 'value' failed to satisfy constraint: Member must "
                         f"have length less than or equal to {MAX_VALUE}")
    if not value:
        raise validation("1 validation error detected: Value at 'value' failed to satisfy constraint: Member must "
                         "have length greater than or equal to 1")


def _tier(asked: str | None, previous: str | None, value: str) -> str:
    """The tier a new version is stored in. An advanced parameter stays advanced (AWS refuses a
    downgrade); Intelligent-Tiering picks Advanced only for a value Standard cannot hold."""
    if asked == "Intelligent-Tiering":
        asked = "Advanced" if previous == "Advanced" or len(value) > TIER_LIMITS["Standard"] else "Standard"
    tier = asked or previous or "Standard"
    if previous == "Advanced" and tier == "Standard":
        raise validation("This parameter uses the advanced-parameter tier. You can't downgrade a parameter from the "
                         "advanced-parameter tier to the standard-parameter tier. If necessary, you can delete the "
                         "advanced parameter and recreate it as a standard parameter.")
    if len(value) > TIER_LIMITS[tier]:
        if tier == "Standard":  # AWS's text, as users' logs quote it
            raise validation("Standard tier parameters support a maximum parameter value of 4096 characters. To "
                             "create a larger parameter value, upgrade the parameter to use the advanced-parameter "
                             f"tier. For more information, see {ADVANCED_DOC}")
        raise validation("Advanced tier parameters support a maximum parameter value of 8192 characters. For more "
                         f"information, see {ADVANCED_DOC}")
    return tier


def _check_pattern(pattern: str | None, value: str) -> None:
    if pattern is None:
        return
    try:
        matches = java_regex.full_matcher(pattern)(value)  # a whole-value match, as Java's Pattern.matches
    except java_regex.InvalidPattern:
        raise AwsError("InvalidAllowedPatternException", f"The allowed pattern is not a valid regular expression: "
                                                         f"{pattern}") from None
    if not matches:
        raise AwsError("ParameterPatternMismatchException",
                       f"Parameter value, cannot be validated against allowedPattern: {pattern}")


def put_parameter(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    name, value, tags = p["Name"], p["Value"], p.get("Tags") or []
    overwrite = bool(p.get("Overwrite"))
    if overwrite and tags:  # moto's text
        raise validation("Invalid request: tags and overwrite can't be used together. To create a parameter with "
                         "tags, please remove overwrite flag. To update tags for an existing parameter, please use "
                         "AddTagsToResource or RemoveTagsFromResource.")
    names.check_new_name(name)
    _check_value(value)
    if p.get("Policies") is not None:
        raise AwsError("NotImplementedException", "kinesim does not apply parameter policies (Expiration, "
                                                  "ExpirationNotification, NoChangeNotification).", 501)
    key = names.key(name)
    with svc.lock:
        doc = svc.parameters.get(key)
        previous = doc["Versions"][-1] if doc else None
        if previous is not None and not overwrite:  # moto's text
            raise AwsError("ParameterAlreadyExists", "The parameter already exists. To overwrite this value, set the "
                                                     "overwrite option in the request to true.")
        kind = p.get("Type") or (previous or {}).get("Type")
        if kind is None:  # moto's text
            raise validation("A parameter type is required when you create a parameter.")
        if p.get("KeyId") is not None and kind != "SecureString":  # AWS refuses it; its text is unrecorded
            raise validation("KeyId is required for SecureString type parameter only.")
        data_type = p.get("DataType") or (previous or {}).get("DataType") or "text"
        if data_type not in DATA_TYPES:  # moto's text
            raise validation(f"The following data type is not supported: {data_type} (Data type names are all "
                             "lowercase.)")
        # An empty pattern or description (what CloudFormation sends to remove one) is none.
        pattern = (p["AllowedPattern"] if "AllowedPattern" in p else (previous or {}).get("AllowedPattern")) or None
        _check_pattern(pattern, value)
        tier = _tier(p.get("Tier"), (previous or {}).get("Tier"), value)
        version = {"Version": previous["Version"] + 1 if previous else 1, "Type": kind, "Value": value,
                   "Tier": tier, "DataType": data_type, "LastModifiedDate": _now(),
                   "LastModifiedUser": svc.caller, "Labels": []}
        if kind == "SecureString":
            keep_key = previous is not None and previous["Type"] == "SecureString"
            version["KeyId"] = p.get("KeyId") or (previous.get("KeyId") if keep_key else None) or views.DEFAULT_KEY
            version["Ciphertext"] = views.ciphertext(value)
        description = (p["Description"] if "Description" in p else (previous or {}).get("Description")) or None
        for member, given in (("Description", description), ("AllowedPattern", pattern)):
            if given is not None:
                version[member] = given
        versions = list(doc["Versions"]) if doc else []
        if len(versions) >= MAX_VERSIONS:
            oldest = versions[0]
            if oldest.get("Labels"):  # moto's text
                raise AwsError("ParameterMaxVersionLimitExceeded", (
                    f"You attempted to create a new version of {name} by calling the PutParameter API with the "
                    f"overwrite flag. Version {oldest['Version']}, the oldest version, can't be deleted because it "
                    "has a label associated with it. Move the label to another version of the parameter, and try "
                    "again."))
            versions.pop(0)
        versions.append(version)
        stored_tags = dict(doc["Tags"]) if doc else {}
        stored_tags.update({t["Key"]: t["Value"] for t in tags})
        svc.save(key, {"Name": doc["Name"] if doc else name, "Versions": versions, "Tags": stored_tags})
    return {"Version": version["Version"], "Tier": tier}


def resolve(svc: SsmService, text: str) -> tuple[str, dict[str, Any], str | None]:
    """The parameter a Get* call names: (name to answer with, the version chosen, the selector)."""
    ref = names.parse_reference(text, svc.region, svc.account)
    if ref is None:
        raise parameter_not_found()
    doc = svc.parameter(ref.key)
    # Asked by name, the answer names it as asked (`/x` or `x`); by ARN, as it was created.
    name = doc["Name"] if ref.by_arn else ref.name
    versions = doc["Versions"]
    if ref.selector is None:
        return name, versions[-1], None
    if ref.selector.isdigit():
        for version in versions:
            if version["Version"] == int(ref.selector):
                return name, version, ref.selector
        raise version_not_found(ref.selector, name)
    for version in versions:
        if ref.selector in version.get("Labels", ()):
            return name, version, ref.selector
    raise parameter_not_found()


def get_parameter(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    with svc.lock:
        name, version, selector = resolve(svc, p["Name"])
    return {"Parameter": views.parameter(svc, name, version, bool(p.get("WithDecryption")), selector)}


def get_parameters(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    found, invalid = [], []
    decrypt = bool(p.get("WithDecryption"))
    for text in dict.fromkeys(p["Names"]):  # each name once, in the order asked
        try:
            with svc.lock:
                name, version, selector = resolve(svc, text)
        except AwsError:
            invalid.append(text)
            continue
        found.append(views.parameter(svc, name, version, decrypt, selector))
    return {"Parameters": found, "InvalidParameters": invalid}


def existing_key(svc: SsmService, text: str) -> str:
    ref = names.parse_reference(text, svc.region, svc.account)
    if ref is None or ref.key not in svc.parameters:
        raise parameter_not_found()
    if ref.selector is not None:
        raise validation(names.BAD_NAME)
    return ref.key


def delete_parameter(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    with svc.lock:
        svc.delete(existing_key(svc, p["Name"]))
    return {}


def delete_parameters(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    deleted, invalid = [], []
    for text in dict.fromkeys(p["Names"]):
        try:
            with svc.lock:
                svc.delete(existing_key(svc, text))
        except AwsError:
            invalid.append(text)
            continue
        deleted.append(text)
    return {"DeletedParameters": deleted, "InvalidParameters": invalid}


def get_parameter_history(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    with svc.lock:
        key = existing_key(svc, p["Name"])
        doc = svc.parameters[key]
    decrypt = bool(p.get("WithDecryption"))
    entries = [views.history(svc, doc["Name"], v, decrypt) for v in doc["Versions"]]
    chosen, token = page(entries, p.get("NextToken"), ("history", key), p.get("MaxResults") or 50,
                         lambda entry: entry["Version"])
    out: dict[str, Any] = {"Parameters": chosen}
    if token:
        out["NextToken"] = token
    return out
