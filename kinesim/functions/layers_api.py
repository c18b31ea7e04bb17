"""Lambda layers: PublishLayerVersion, GetLayerVersion, GetLayerVersionByArn, ListLayers,
ListLayerVersions, DeleteLayerVersion, and a function's `Layers` (checked, and unpacked where the
runtime puts them on the handler's path, as AWS does under /opt).

A layer version is a document of kind "layer_version" (`<layer>:<n>`); a document of kind
"layer" keeps each layer's last version number, since numbers are never reused, not even once
every version is deleted (LocalStack's AWS recording test_layer_lifecycle publishes version 3
after deleting 1 and 2). Contents are unpacked by the same CodeStore as function code, with the
same safety checks, under `<data>/layers/<layer>/<sha256>/`. A deleted layer version's content
stays while a function or version still uses it: on AWS such functions keep running.

Texts and checks as AWS answers them (test_lambda_api.snapshot.json, TestLambdaLayer).
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

from ..protocol.errors import AwsError
from ..protocol.rest import RequestContext
from .functions_api import s3_package
from .errors import invalid_parameter, lambda_date, resource_not_found

if TYPE_CHECKING:
    from .service import LambdaService

if TYPE_CHECKING:
    from ..store import Store
    from .code import CodeStore

LAYER_VERSION_KIND = "layer_version"
LAYER_KIND = "layer"
MAX_LAYERS_PER_FUNCTION = 5
MAX_LIST_ITEMS = 50
_NOT_FOUND = "The resource you requested does not exist."
_ARN_PATTERN = ("(arn:(aws[a-zA-Z-]*)?:lambda:(eusc-)?[a-z]{2}((-gov)|(-iso([a-z]?)))?-[a-z]+-\\d{1}:\\d{12}:layer:"
                "[a-zA-Z0-9-_]+:[0-9]+)|(arn:[a-zA-Z0-9-]+:lambda:::awslayer:[a-zA-Z0-9-_]+)")
# What ListLayerVersions and ListLayers show of a version (no Content, no LayerArn).
_LIST_FIELDS = ("LayerVersionArn", "Version", "Description", "CreatedDate", "CompatibleRuntimes", "LicenseInfo",
                "CompatibleArchitectures")


def _split_arn(arn: str) -> tuple[str, str, str, str | None] | None:
    """(region, account, layer name, version or None) of a layer (version) ARN."""
    parts = arn.split(":")
    if len(parts) not in (7, 8) or parts[0] != "arn" or parts[2] != "lambda" or parts[5] != "layer":
        return None
    return parts[3], parts[4], parts[6], parts[7] if len(parts) == 8 else None


class Layers:
    """Every layer version, in memory and in the store, and their unpacked contents."""

    def __init__(self, store: "Store", code: "CodeStore", arn_of: Callable[..., str]):
        self.store = store
        self.code = code
        self.arn_of = arn_of  # (name, version=None) -> ARN
        self.lock = threading.RLock()
        self.versions: dict[str, dict[int, dict[str, Any]]] = {}
        self.last_number: dict[str, int] = {n: d["LastVersion"] for n, d in store.documents(LAYER_KIND).items()}
        for doc in store.documents(LAYER_VERSION_KIND).values():
            self.versions.setdefault(doc["LayerName"], {})[doc["Version"]] = doc

    # contents

    def dirs(self, packages: list[list[str]] | None) -> list[str]:
        """Absolute directories of a function's layers, in its Layers order (the runtime's LayerDirs)."""
        out = []
        for name, package_id in packages or ():
            path = self.code.restore(name, {"PackageId": package_id})
            if path is not None:
                out.append(path)
        return out

    def prune(self, in_use: set[tuple[str, str]]) -> None:
        """Remove unpacked contents that no layer version and no function uses any more."""
        with self.lock:
            keep: dict[str, set[str]] = {}
            for name, versions in self.versions.items():
                keep.setdefault(name, set()).update(v["PackageId"] for v in versions.values())
            for name, package_id in in_use:
                keep.setdefault(name, set()).add(package_id)
            for name in self.code.function_names():
                if name in keep:
                    self.code.prune(name, keep[name])
                else:
                    self.code.remove(name)

    # a function's Layers

    def resolve(self, arns: list[str] | None, region: str, account: str) -> list[dict[str, Any]]:
        """The layer versions a function's `Layers` name, checked as AWS checks them."""
        arns = arns or []
        if len(arns) > MAX_LAYERS_PER_FUNCTION:
            raise invalid_parameter("Cannot reference more than 5 layers.")
        found: list[dict[str, Any]] = []
        seen: dict[str, str] = {}
        for arn in arns:
            parts = _split_arn(arn)
            if parts is None or parts[3] is None or not parts[3].isdigit():
                raise AwsError("ValidationException", (
                    f"1 validation error detected: Value '[{arn}]' at 'layers' failed to satisfy constraint: Member "
                    "must satisfy constraint: [Member must have length less than or equal to 2048, Member must have "
                    "length greater than or equal to 1, Member must satisfy regular expression pattern: "
                    f"{_ARN_PATTERN}, Member must not be null]"))
            layer_region, layer_account, name, number = parts
            if layer_account == account and layer_region != region:
                raise invalid_parameter(f"Layers are not in the same region as the function. Layers are expected to be "
                                        f"in region {region}.")
            doc = self.versions.get(name, {}).get(int(number)) if layer_account == account else None
            if doc is None:
                raise invalid_parameter(f"Layer version {arn} does not exist.")
            layer_arn = arn.rsplit(":", 1)[0]
            if layer_arn in seen:
                raise invalid_parameter(
                    "Two different versions of the same layer are not allowed to be referenced in the same function. "
                    f"{seen[layer_arn]} and {arn} are versions of the same layer.")
            seen[layer_arn] = arn
            found.append(doc)
        return found

    def apply(self, cfg: dict[str, Any], layers: list[dict[str, Any]]) -> None:
        """Set a function configuration's Layers (and where their contents are) to resolved layers."""
        for key in ("Layers", "LayerPackages", "LayerDirs"):
            cfg.pop(key, None)
        packages = [[d["LayerName"], d["PackageId"]] for d in layers]
        cfg["LayerDirs"] = self.dirs(packages)
        if layers:
            cfg["Layers"] = [{"Arn": d["LayerVersionArn"], "CodeSize": d["Content"]["CodeSize"]} for d in layers]
            cfg["LayerPackages"] = packages

    # versions

    def newest_first(self, name: str) -> list[dict[str, Any]]:
        with self.lock:  # a copy: writers change the dicts in place
            return sorted(self.versions.get(name, {}).values(), key=lambda d: -d["Version"])

    def version(self, name: str, number: int) -> dict[str, Any]:
        if number < 1:
            raise invalid_parameter("Layer Version Cannot be less than 1")
        doc = self.versions.get(name, {}).get(number)
        if doc is None:
            raise resource_not_found(_NOT_FOUND)
        return doc

    def add(self, name: str, fields: dict[str, Any], package: bytes) -> dict[str, Any]:
        with self.lock:  # with prune(): content unpacked is never taken for unused before it is recorded
            stored = self.code.store_zip(name, package)
            number = max([self.last_number.get(name, 0)] + list(self.versions.get(name, {}))) + 1
            doc = {"LayerName": name, "LayerArn": self.arn_of(name), "LayerVersionArn": self.arn_of(name, number),
                   "Version": number, "CreatedDate": lambda_date(),
                   "Content": {"CodeSha256": stored.sha256, "CodeSize": stored.size},
                   "PackageId": stored.package_id, **fields}
            self.store.put_document(LAYER_VERSION_KIND, f"{name}:{number}", doc)
            self.store.put_document(LAYER_KIND, name, {"LastVersion": number})
            self.versions.setdefault(name, {})[number] = doc
            self.last_number[name] = number
        return doc

    def remove(self, name: str, number: int) -> None:
        with self.lock:
            if self.versions.get(name, {}).pop(number, None) is not None:
                self.store.delete_document(LAYER_VERSION_KIND, f"{name}:{number}")
            if not self.versions.get(name):
                self.versions.pop(name, None)


# views

def _layer_name(ref: str) -> str:
    """A LayerName parameter: a name or a layer ARN."""
    if ref.startswith("arn:"):
        parts = _split_arn(ref)
        if parts is None:
            raise resource_not_found(_NOT_FOUND)
        return parts[2]
    return ref


def _matches(doc: dict[str, Any], runtime: str | None, architecture: str | None) -> bool:
    return ((runtime is None or runtime in (doc.get("CompatibleRuntimes") or []))
            and (architecture is None or architecture in (doc.get("CompatibleArchitectures") or [])))


def _listed(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: doc[k] for k in _LIST_FIELDS if k in doc}


# operations

def publish_layer_version(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name = _layer_name(p["LayerName"])
    content = p["Content"]
    if content.get("ZipFile") is not None:
        package = content["ZipFile"]
    elif content.get("S3Bucket") and content.get("S3Key"):
        package = s3_package(svc, content["S3Bucket"], content["S3Key"])
    else:
        raise invalid_parameter("Please provide a source for the layer content: ZipFile, or S3Bucket and S3Key.")
    fields = {"Description": p.get("Description") or "",
              "CompatibleRuntimes": p.get("CompatibleRuntimes") or [],
              "CompatibleArchitectures": p.get("CompatibleArchitectures") or []}
    if p.get("LicenseInfo") is not None:
        fields["LicenseInfo"] = p["LicenseInfo"]
    # Content has no Location: kinesim serves no download of a layer's archive (AWS: a pre-signed URL).
    return svc.layers.add(name, fields, package)


def get_layer_version(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    return svc.layers.version(_layer_name(p["LayerName"]), p["VersionNumber"])


def get_layer_version_by_arn(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    parts = _split_arn(p["Arn"])
    if parts is None or parts[3] is None or (parts[0], parts[1]) != (svc.settings.region, svc.settings.account_id):
        raise resource_not_found(_NOT_FOUND)
    return svc.layers.version(parts[2], int(parts[3]))


def list_layer_versions(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    name = _layer_name(p["LayerName"])
    versions = svc.layers.newest_first(name)
    matching = [_listed(d) for d in versions
                if _matches(d, p.get("CompatibleRuntime"), p.get("CompatibleArchitecture"))]
    return _page(matching, "LayerVersions", p)


def list_layers(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    layers = []
    with svc.layers.lock:
        names = sorted(svc.layers.versions)
    for name in names:
        versions = svc.layers.newest_first(name)
        latest = next((d for d in versions
                       if _matches(d, p.get("CompatibleRuntime"), p.get("CompatibleArchitecture"))), None)
        if latest is not None:
            layers.append({"LayerName": name, "LayerArn": latest["LayerArn"], "LatestMatchingVersion": _listed(latest)})
    return _page(layers, "Layers", p)


def _page(items: list[dict[str, Any]], key: str, p: dict[str, Any]) -> dict[str, Any]:
    """A page of a list; the marker is the index of the page's first item."""
    marker = p.get("Marker")
    if marker is not None and not marker.isdigit():
        raise invalid_parameter(f"Invalid marker: {marker}")
    start = int(marker or 0)
    limit = p.get("MaxItems") or MAX_LIST_ITEMS
    out: dict[str, Any] = {key: items[start:start + limit]}
    if start + limit < len(items):
        out["NextMarker"] = str(start + limit)
    return out


def delete_layer_version(svc: LambdaService, p: dict[str, Any], context: RequestContext) -> dict[str, Any]:
    if p["VersionNumber"] < 1:
        raise invalid_parameter("Layer Version Cannot be less than 1")
    # Deleting what does not exist succeeds (test_layer_exceptions: delete_nonexistent_response).
    svc.layers.remove(_layer_name(p["LayerName"]), p["VersionNumber"])
    svc.layers.prune(svc.layer_packages_in_use())
    return {}
