"""LabelParameterVersion and UnlabelParameterVersion: names for versions, usable as selectors
(`NAME:label`). The rules are the user guide's ("Working with parameter labels"): at most 10 labels
a version; a label names one version of a parameter at a time (labelling another version moves
it); up to 100 characters of letters, numbers, `.`, `-` and `_`, not beginning with a number,
`aws` or `ssm`. A label breaking them is not applied and comes back in `InvalidLabels`."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kinesim.protocol.errors import AwsError

from .errors import version_not_found
from .parameters_api import existing_key

if TYPE_CHECKING:
    from .service import SsmService

MAX_LABELS = 10
_LABEL = re.compile(r"[a-zA-Z0-9_.\-]{1,100}")


def _valid(label: str) -> bool:
    return bool(_LABEL.fullmatch(label)) and not label[0].isdigit() and not label.lower().startswith(("aws", "ssm"))


def _version(versions: list[dict[str, Any]], number: int | None, name: str) -> dict[str, Any]:
    if number is None:
        return versions[-1]
    for version in versions:
        if version["Version"] == number:
            return version
    raise version_not_found(number, name)


def label_parameter_version(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    labels = list(dict.fromkeys(p["Labels"]))
    with svc.lock:
        key = existing_key(svc, p["Name"])
        doc = svc.parameters[key]
        versions = [dict(v, Labels=list(v.get("Labels", []))) for v in doc["Versions"]]
        target = _version(versions, p.get("ParameterVersion"), p["Name"])
        valid = [label for label in labels if _valid(label)]
        added = [label for label in valid if label not in target["Labels"]]
        if len(target["Labels"]) + len(added) > MAX_LABELS:  # moto's text
            raise AwsError("ParameterVersionLabelLimitExceeded", "A parameter version can have maximum 10 labels."
                                                                 "Move one or more labels to another version and "
                                                                 "try again.")
        for version in versions:  # a label moves from whichever version had it
            if version is not target:
                version["Labels"] = [label for label in version["Labels"] if label not in valid]
        target["Labels"].extend(added)
        svc.save(key, {**doc, "Versions": versions})
    return {"InvalidLabels": [label for label in labels if label not in valid],
            "ParameterVersion": target["Version"]}


def unlabel_parameter_version(svc: SsmService, p: dict[str, Any]) -> dict[str, Any]:
    labels = list(dict.fromkeys(p["Labels"]))
    with svc.lock:
        key = existing_key(svc, p["Name"])
        doc = svc.parameters[key]
        versions = [dict(v, Labels=list(v.get("Labels", []))) for v in doc["Versions"]]
        target = _version(versions, p["ParameterVersion"], p["Name"])
        removed = [label for label in labels if label in target["Labels"]]
        target["Labels"] = [label for label in target["Labels"] if label not in removed]
        svc.save(key, {**doc, "Versions": versions})
    return {"RemovedLabels": removed, "InvalidLabels": [label for label in labels if label not in removed]}
