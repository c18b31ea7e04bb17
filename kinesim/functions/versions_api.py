"""Function versions and aliases: PublishVersion, ListVersionsByFunction, CreateAlias, GetAlias,
UpdateAlias, DeleteAlias, ListAliases, and what a qualifier (a version number or an alias) names.

A published version is an immutable snapshot of `$LATEST`'s configuration and code: a document of
kind "function_version" (named `<function>:<n>`) holding the FunctionConfiguration with
`Version` "n" and the qualified `FunctionArn`, plus the internal keys of its code (`PackageId`:
the CodeStore keeps every package a version still uses) and its layers. Aliases are documents of
kind "function_alias" (`<function>:<alias>`), the AliasConfiguration plus `FunctionName`.

AWS's rules, as LocalStack's recorded AWS answers (tests/aws/services/lambda_/
test_lambda_api.snapshot.json) show them: numbers count up from 1 and are never reused;
publishing when nothing changed since the last version returns that version; publishing and
creating an alias give `$LATEST` a new RevisionId; an alias routes to at most one extra version.
"""
from __future__ import annotations

import hashlib
import random
import threading
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from ..protocol.errors import AwsError
from ..protocol.rest import RequestContext
from .functions_api import GET_ONLY_FIELDS, check_revision, configuration, paginate
from .errors import conflict, invalid_parameter, resource_not_found

if TYPE_CHECKING:
    from .service import LambdaService

if TYPE_CHECKING:
    from ..store import Store
    from .code import CodeStore

VERSION_KIND = "function_version"
ALIAS_KIND = "function_alias"
LATEST = "$LATEST"
MAX_LIST_ITEMS = 50

# What may differ between $LATEST and the version published from it without a change to publish:
# identity, bookkeeping, status, and where the code happens to be unpacked.
_NOT_CONTENT = frozenset({
    "FunctionArn", "Version", "RevisionId", "LastModified", "Tags", "State", "StateReason", "StateReasonCode",
    "LastUpdateStatus", "LastUpdateStatusReason", "LastUpdateStatusReasonCode", "CodeDir", "LayerDirs",
    "LastVersion",
})


def validation_error(message: str) -> AwsError:
    return AwsError("ValidationException", message)


def _content_hash(fn: dict[str, Any]) -> str:
    """Identifies what a version would run: code and configuration."""
    content = {k: v for k, v in fn.items() if k not in _NOT_CONTENT}
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _version_key(version: str) -> str:
    """Sort key: $LATEST first ('$' sorts before digits), then versions by number."""
    return version if version == LATEST else f"{int(version):012d}"


class Versions:
    """The published versions and aliases of every function, in memory and in the store; the
    function operations reach `publish` and `delete` through the service (`svc.versions`)."""

    def __init__(self, svc: LambdaService, store: "Store", code: "CodeStore"):
        self.svc = svc
        self.store = store
        self.lock = threading.RLock()
        self.versions: dict[str, dict[str, dict[str, Any]]] = {}   # function -> number -> configuration
        self.aliases: dict[str, dict[str, dict[str, Any]]] = {}    # function -> alias name -> alias
        for doc in store.documents(VERSION_KIND).values():
            doc["CodeDir"] = code.restore(doc["FunctionName"], doc)
            self.versions.setdefault(doc["FunctionName"], {})[doc["Version"]] = doc
        for doc in store.documents(ALIAS_KIND).values():
            self.aliases.setdefault(doc["FunctionName"], {})[doc["Name"]] = doc

    def forget_orphans(self, functions: set[str]) -> None:
        """Drop the versions and aliases of functions deleted part-way (a crash mid-DeleteFunction)."""
        for name in set(self.versions) | set(self.aliases):
            if name not in functions:
                self.drop_function(name)

    # reads

    def version(self, name: str, number: str) -> dict[str, Any] | None:
        return self.versions.get(name, {}).get(number)

    def alias(self, name: str, alias: str) -> dict[str, Any] | None:
        return self.aliases.get(name, {}).get(alias)

    def of(self, name: str) -> list[dict[str, Any]]:
        """A function's versions, oldest first."""
        with self.lock:  # reads copy under the lock: writers change these dicts in place
            return sorted(self.versions.get(name, {}).values(), key=lambda v: int(v["Version"]))

    def aliases_of(self, name: str) -> list[dict[str, Any]]:
        with self.lock:
            return sorted(self.aliases.get(name, {}).values(), key=lambda a: a["Name"])

    def package_ids(self, name: str) -> set[str]:
        """The code packages a function's versions run (kept when $LATEST's code changes)."""
        return {v.get("PackageId", "") for v in self.of(name)} - {""}

    def all_configurations(self) -> list[dict[str, Any]]:
        with self.lock:
            return [v for versions in self.versions.values() for v in versions.values()]

    def resolve(self, latest: dict[str, Any], qualifier: str, route: bool) -> dict[str, Any] | None:
        """The configuration a version number or an alias names. An alias with a routing
        configuration sends its weight of invocations to the extra version when `route`."""
        name = latest["FunctionName"]
        if qualifier.isdigit():
            return self.version(name, qualifier)
        alias = self.alias(name, qualifier)
        if alias is None:
            return None
        target = alias["FunctionVersion"]
        weights = (alias.get("RoutingConfig") or {}).get("AdditionalVersionWeights") or {}
        if route:
            for extra, weight in weights.items():
                if random.random() < weight:
                    target = extra
        return latest if target == LATEST else self.version(name, target)

    def referencing_aliases(self, name: str, number: str) -> list[str]:
        return [a["Name"] for a in self.aliases_of(name)
                if a["FunctionVersion"] == number
                or number in ((a.get("RoutingConfig") or {}).get("AdditionalVersionWeights") or {})]

    # writes

    def save_version(self, doc: dict[str, Any]) -> None:
        with self.lock:
            self.store.put_document(VERSION_KIND, f"{doc['FunctionName']}:{doc['Version']}", doc)
            self.versions.setdefault(doc["FunctionName"], {})[doc["Version"]] = doc

    def drop_version(self, name: str, number: str) -> None:
        with self.lock:
            self.versions.get(name, {}).pop(number, None)
            self.store.delete_document(VERSION_KIND, f"{name}:{number}")

    def save_alias(self, doc: dict[str, Any]) -> None:
        with self.lock:
            self.store.put_document(ALIAS_KIND, f"{doc['FunctionName']}:{doc['Name']}", doc)
            self.aliases.setdefault(doc["FunctionName"], {})[doc["Name"]] = doc

    def drop_alias(self, name: str, alias: str) -> None:
        with self.lock:
            self.aliases.get(name, {}).pop(alias, None)
            self.store.delete_document(ALIAS_KIND, f"{name}:{alias}")

    def drop_function(self, name: str) -> None:
        with self.lock:
            versions = self.versions.pop(name, {})
            aliases = self.aliases.pop(name, {})
            self.store.delete_documents(VERSION_KIND, [f"{name}:{n}" for n in versions])
            self.store.delete_documents(ALIAS_KIND, [f"{name}:{a}" for a in aliases])

    def publish(self, name: str, description: str | None = None, code_sha256: str | None = None,
                revision_id: str | None = None) -> dict[str, Any]:
        """Publish $LATEST as a new version (PublishVersion, and `Publish` on CreateFunction and
        UpdateFunctionCode); the last version when nothing changed since it was published."""
        return _publish(self.svc, name, description, code_sha256, revision_id)

    def delete(self, name: str, qualifier: str) -> None:
        """DeleteFunction with a qualifier: one version."""
        _delete_version(self.svc, name, qualifier)


# publishing

def _publish(svc: LambdaService, name: str, description: str | None, code_sha256: str | None,
             revision_id: str | None) -> dict[str, Any]:
    registry: Versions = svc.versions
    with svc.lock:
        latest = svc.function(name)
        check_revision(latest, revision_id)
        if code_sha256 and code_sha256 != latest["CodeSha256"] and not latest.get("HotReload"):
            raise invalid_parameter(
                f"CodeSHA256 ({code_sha256}) is different from current CodeSHA256 in $LATEST ({latest['CodeSha256']}). "
                "Please try again with the CodeSHA256 in $LATEST.")
        content = _content_hash(latest)
        published = registry.of(name)
        if published and published[-1].get("ContentHash") == content:
            return published[-1]
        # A crash between the two writes below leaves LastVersion behind the stored versions.
        number = max([latest.get("LastVersion", 0)] + [int(v["Version"]) for v in published]) + 1
        version = {k: v for k, v in latest.items() if k not in ("Tags", "LastVersion")}
        version.update(Version=str(number), FunctionArn=svc.function_arn(name, str(number)),
                       RevisionId=str(uuid.uuid4()), State="Active", LastUpdateStatus="Successful",
                       ContentHash=content)
        if description is not None:
            version["Description"] = description
        registry.save_version(version)
        svc.save_function({**latest, "LastVersion": number, "RevisionId": str(uuid.uuid4())})
    return version


def _latest(svc: LambdaService, ref: str) -> dict[str, Any]:
    """The function an unqualified reference names (versions and aliases have no versions)."""
    name, qualifier = svc.parse_function_ref(ref)
    if qualifier is not None:
        raise invalid_parameter("Version and alias qualifiers are not allowed in the function name for this operation.")
    return svc.function(name)


def _bump_latest_revision(svc: LambdaService, name: str) -> None:
    with svc.lock:
        latest = svc.functions.get(name)
        if latest is not None:
            svc.save_function({**latest, "RevisionId": str(uuid.uuid4())})


def publish_version(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    fn = _latest(svc, p["FunctionName"])
    return _publish(svc, fn["FunctionName"], p.get("Description"), p.get("CodeSha256"), p.get("RevisionId"))


def list_versions_by_function(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    latest = _latest(svc, p["FunctionName"])
    name = latest["FunctionName"]
    by_key = {_version_key(LATEST): configuration(svc, latest, LATEST)}
    by_key.update({_version_key(v["Version"]): v for v in svc.versions.of(name)})
    page, next_marker = paginate(sorted(by_key), p.get("Marker"), p.get("MaxItems") or MAX_LIST_ITEMS)
    out: dict[str, Any] = {"Versions": [{k: v for k, v in by_key[key].items() if k not in GET_ONLY_FIELDS}
                                        for key in page]}
    if next_marker is not None:
        out["NextMarker"] = next_marker
    return out


# aliases

def _target(svc: LambdaService, name: str, version: str) -> None:
    """A version an alias may point at: $LATEST or a published one."""
    if version != LATEST and (not version.isdigit() or svc.versions.version(name, version) is None):
        raise resource_not_found(f"Function not found: {svc.function_arn(name, version)}")


def _routing(svc: LambdaService, name: str, target: str, routing: dict[str, Any] | None) -> dict[str, Any] | None:
    """A checked RoutingConfig (None when it routes nothing), with AWS's checks in AWS's order."""
    weights = (routing or {}).get("AdditionalVersionWeights") or {}
    if not weights:
        return None
    if len(weights) > 1:
        raise invalid_parameter("Number of items in AdditionalVersionWeights cannot be greater than 1")
    for version, weight in weights.items():
        if not 0.0 <= weight <= 1.0:
            raise validation_error(
                f"1 validation error detected: Value '{{{version}={float(weight)}}}' at "
                "'routingConfig.additionalVersionWeights' failed to satisfy constraint: Map value must satisfy "
                "constraint: [Member must have value less than or equal to 1.0, Member must have value greater than "
                "or equal to 0.0, Member must not be null]")
        if version == target:
            raise invalid_parameter(f"Invalid function version {target}. Function version {target} is already "
                                    "included in routing configuration.")
        if target == LATEST:
            raise invalid_parameter("$LATEST is not supported for an alias pointing to more than 1 version")
        if not version.isdigit():
            raise validation_error(
                f"1 validation error detected: Value '{{{version}={float(weight)}}}' at "
                "'routingConfig.additionalVersionWeights' failed to satisfy constraint: Map keys must satisfy "
                "constraint: [Member must have length less than or equal to 1024, Member must have length greater "
                "than or equal to 1, Member must satisfy regular expression pattern: [0-9]+]")
        _target(svc, name, version)
    return {"AdditionalVersionWeights": {k: float(v) for k, v in weights.items()}}


def _alias_name(svc: LambdaService, p: dict[str, Any]) -> tuple[str, str]:
    """(function name, alias name) of an alias operation; the function must exist."""
    name, qualifier = svc.parse_function_ref(p["FunctionName"])
    if qualifier is not None:
        raise invalid_parameter("Version and alias qualifiers are not allowed in the function name for this operation.")
    return name, p["Name"]


def create_alias(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, alias = _alias_name(svc, p)
    version = p["FunctionVersion"]
    if name not in svc.functions:
        raise resource_not_found(f"Function not found: {svc.function_arn(name, version)}")
    with svc.lock:  # a version being deleted meanwhile would leave the alias dangling
        _target(svc, name, version)
        if svc.versions.alias(name, alias) is not None:
            raise conflict(f"Alias already exists: {svc.function_arn(name, alias)}")
        doc: dict[str, Any] = {"AliasArn": svc.function_arn(name, alias), "Name": alias, "FunctionVersion": version,
                               "Description": p.get("Description") or "", "RevisionId": str(uuid.uuid4()),
                               "FunctionName": name}
        routing = _routing(svc, name, version, p.get("RoutingConfig"))
        if routing:
            doc["RoutingConfig"] = routing
        svc.versions.save_alias(doc)
        _bump_latest_revision(svc, name)
    return doc


def get_alias(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, alias = _alias_name(svc, p)
    svc.function(name)
    doc = svc.versions.alias(name, alias)
    if doc is None:
        raise resource_not_found(f"Cannot find alias arn: {svc.function_arn(name, alias)}")
    return doc


def update_alias(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, alias = _alias_name(svc, p)
    svc.function(name)
    with svc.lock:
        current = svc.versions.alias(name, alias)
        if current is None:
            raise resource_not_found(f"Alias not found: {svc.function_arn(name, alias)}")
        check_revision(current, p.get("RevisionId"))
        doc = dict(current)
        if p.get("FunctionVersion") is not None:
            _target(svc, name, p["FunctionVersion"])
            doc["FunctionVersion"] = p["FunctionVersion"]
        if p.get("Description") is not None:
            doc["Description"] = p["Description"]
        routing = p["RoutingConfig"] if p.get("RoutingConfig") is not None else doc.get("RoutingConfig")
        doc.pop("RoutingConfig", None)
        checked = _routing(svc, name, doc["FunctionVersion"], routing)
        if checked:
            doc["RoutingConfig"] = checked
        doc["RevisionId"] = str(uuid.uuid4())  # AWS gives a new one even when nothing changed
        svc.versions.save_alias(doc)
    return doc


def delete_alias(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name, alias = _alias_name(svc, p)
    svc.function(name)
    # Deleting an alias that does not exist succeeds (test_non_existent_alias_deletion).
    svc.versions.drop_alias(name, alias)
    svc.event_invoke_configs.delete(name, alias)  # a new alias of that name starts without it, as on AWS
    return {}


def list_aliases(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name = _latest(svc, p["FunctionName"])["FunctionName"]
    aliases = {a["Name"]: a for a in svc.versions.aliases_of(name)
               if p.get("FunctionVersion") is None or a["FunctionVersion"] == p["FunctionVersion"]}
    page, next_marker = paginate(sorted(aliases), p.get("Marker"), p.get("MaxItems") or MAX_LIST_ITEMS)
    out: dict[str, Any] = {"Aliases": [aliases[a] for a in page]}
    if next_marker is not None:
        out["NextMarker"] = next_marker
    return out


# deleting one version (DeleteFunction with a version qualifier)

def _delete_version(svc: LambdaService, name: str, qualifier: str) -> None:
    if not qualifier.isdigit():
        raise invalid_parameter("Deletion of aliases is not currently supported.")
    with svc.lock:
        svc.function(name)
        referencing = svc.versions.referencing_aliases(name, qualifier)
        if referencing:
            raise conflict(f"Unable to delete version because the following aliases reference it: "
                           f"[{', '.join(referencing)}]")
        # A version that does not exist is deleted all the same (AWS answers 204).
        svc.versions.drop_version(name, qualifier)
    svc.runtime.retire(name)
    # Its package is removed by the next UpdateFunctionCode or restart (both prune what no version
    # uses): pruning here could take a package a concurrent update has unpacked but not saved yet.
