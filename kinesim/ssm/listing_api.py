"""DescribeParameters and GetParametersByPath, with their filters: `Filters` (the older Name/Type/
KeyId filters of DescribeParameters) and `ParameterFilters` (`{Key, Option, Values}`).

The filter keys and options each call takes, and the texts of the refusals, are moto's (its SSM
backend copies AWS's sentences)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinesim.protocol.errors import AwsError

from . import names, views
from .errors import validation
from .paging import page

if TYPE_CHECKING:
    from .service import SsmService

_TYPES = ("String", "StringList", "SecureString")
_TIERS = ("Standard", "Advanced", "Intelligent-Tiering")
_NEEDS_VALUES = ("Name", "Type", "Path", "Tier", "KeyId", "DataType")


def _check_filters(filters: list[dict[str, Any]], by_path: bool) -> list[tuple[str, str, list[str]]]:
    """The filters as (key, option, values), checked; Path values without their trailing slash."""
    seen: set[str] = set()
    checked = []
    for f in filters:
        key, values = f["Key"], list(f.get("Values") or [])
        option = f.get("Option") or ("OneLevel" if key == "Path" else "Equals")
        if by_path and key in ("Name", "Path", "Tier"):
            raise AwsError("InvalidFilterKey", f"The following filter key is not valid: {key}. Valid filter "
                                                    "keys include: [Type, KeyId].")
        if not by_path and key == "Label":
            raise AwsError("InvalidFilterKey", "The following filter key is not valid: Label. Valid filter keys "
                                                    "include: [Path, Name, Type, KeyId, Tier].")
        if key in _NEEDS_VALUES and not values:
            raise AwsError("InvalidFilterValue", f"The following filter values are missing : null for filter "
                                                      f"key {key}.")
        if key in seen:
            raise AwsError("InvalidFilterKey", f"The following filter is duplicated in the request: {key}. A "
                                                    "request can contain only one occurrence of a specific filter.")
        seen.add(key)
        if key == "Path":
            if option not in ("Recursive", "OneLevel"):
                raise AwsError("InvalidFilterOption", f"The following filter option is not valid: {option}. "
                                                           "Valid options include: [Recursive, OneLevel].")
            values = [names.check_path(v) for v in values]
        elif option not in (("Equals", "BeginsWith", "Contains") if key == "Name" else ("Equals", "BeginsWith")):
            raise AwsError("InvalidFilterOption", f"The following filter option is not valid: {option}. Valid "
                                                       "options include: [BeginsWith, Equals].")
        for allowed, what in ((_TYPES, "Type"), (_TIERS, "Tier")):
            bad = [v for v in values if key == what and v not in allowed]
            if bad:
                raise AwsError("InvalidFilterValue", f"The following filter value is not valid: {bad[0]}. Valid "
                                                          f"values include: [{', '.join(allowed)}].")
        checked.append((key, option, values))
    return checked


def _matches(option: str, found: str | None, values: list[str]) -> bool:
    if found is None:
        return False
    if option == "BeginsWith":
        return any(found.startswith(v) for v in values)
    if option == "Contains":
        return any(v in found for v in values)
    return found in values


def _version_for(doc: dict[str, Any], filters: list[tuple[str, str, list[str]]]) -> dict[str, Any] | None:
    """The version of the parameter the filters choose (the latest; the labelled one for a Label
    filter), or None when the parameter does not pass them."""
    version = doc["Versions"][-1]
    name = doc["Name"]
    for key, option, values in filters:
        if key == "Label":
            labelled = [v for v in doc["Versions"] if set(values) & set(v.get("Labels", ()))]
            if not labelled:
                return None
            version = labelled[-1]
        elif key == "Name":
            # A name matches with or without its leading slash (moto; AWS's console filters alike).
            if option == "Contains":
                ok = _matches(option, name, values)
            else:
                ok = _matches(option, names.full_path(name), [names.full_path(v) for v in values])
            if not ok:
                return None
        elif key == "Path":
            if not any(names.under(name, v, option == "Recursive") for v in values):
                return None
        elif key.startswith("tag:"):
            tag = doc.get("Tags", {}).get(key[4:])
            if tag is None or values and not _matches(option, tag, values):
                return None
        elif not _matches(option, version.get(key), values):  # Type, KeyId, Tier, DataType
            return None
    return version


def _legacy_filters(filters: list[dict[str, Any]]) -> list[tuple[str, str, list[str]]]:
    """DescribeParameters' older `Filters`: Name begins with, Type and KeyId equal."""
    return [(f["Key"], "BeginsWith" if f["Key"] == "Name" else "Equals", list(f["Values"])) for f in filters]


def describe_parameters(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    if p.get("Filters") and p.get("ParameterFilters"):
        raise validation("You can use either Filters or ParameterFilters in a single request.")
    filters = _legacy_filters(p["Filters"]) if p.get("Filters") else _check_filters(p.get("ParameterFilters") or [],
                                                                                     by_path=False)
    entries = []
    for _, doc in svc.sorted_parameters():
        version = _version_for(doc, filters)
        if version is not None:
            entries.append(views.metadata(svc, doc["Name"], version))
    entries.sort(key=lambda e: e["Name"])
    query = ("describe", p.get("Filters"), p.get("ParameterFilters"))
    chosen, token = page(entries, p.get("NextToken"), query, p.get("MaxResults") or 10, lambda e: e["Name"])
    out: dict[str, Any] = {"Parameters": chosen}
    if token:
        out["NextToken"] = token
    return out


def get_parameters_by_path(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    path = names.check_path(p["Path"])
    recursive = bool(p.get("Recursive"))
    filters = _check_filters(p.get("ParameterFilters") or [], by_path=True)
    decrypt = bool(p.get("WithDecryption"))
    entries = []
    for _, doc in svc.sorted_parameters():
        if not names.under(doc["Name"], path, recursive):
            continue
        version = _version_for(doc, filters)
        if version is not None:
            entries.append(views.parameter(svc, doc["Name"], version, decrypt))
    entries.sort(key=lambda e: e["Name"])
    query = ("path", path, recursive, p.get("ParameterFilters"))
    chosen, token = page(entries, p.get("NextToken"), query, p.get("MaxResults") or 10, lambda e: e["Name"])
    out: dict[str, Any] = {"Parameters": chosen}
    if token:
        out["NextToken"] = token
    return out
