"""botocore's service models, read as botocore's `Loader.load_service_model` reads them, without
importing `botocore.loaders`: that module pulls in `botocore.compat`, `botocore.utils` and urllib3,
~30 ms of `kinesim serve`'s start-up before its first answer (issue 22), for reading JSON files.

What is read is the same (tests/test_models.py compares every model kinesim loads with botocore's):
the search paths in the Loader's order (`~/.aws/models`, then botocore's `data` directory), the
latest API version that has the file, `.json` before `.json.gz`, and the `sdk` extras merged in."""
from __future__ import annotations

import gzip
import importlib.util
import os
from typing import Any

import orjson

_TYPE = "service-2"
_EXTRAS = ("sdk",)  # botocore's Loader.BUILTIN_EXTRAS_TYPES
_OPENERS = ((".json", open), (".json.gz", gzip.open))


class UnknownModel(LookupError):
    pass


def search_paths() -> list[str]:
    spec = importlib.util.find_spec("botocore")  # finds the package without running its __init__
    if spec is None or spec.origin is None:
        raise UnknownModel("botocore is not installed")
    builtin = os.path.join(os.path.dirname(spec.origin), "data")
    return [os.path.expanduser(os.path.join("~", ".aws", "models")), builtin]


def service_model(service: str) -> Any:
    """botocore's ServiceModel of `service`. Not through a botocore Session, which reads the AWS
    config of kinesim's environment: an AWS_PROFILE naming no profile made it raise
    ProfileNotFound, and the service answer 500s."""
    from botocore.model import ServiceModel
    return ServiceModel(load_service_model(service), service_name=service)


def load_service_model(service: str) -> dict[str, Any]:
    """The model of `service` at its latest API version (UnknownModel if no path has one)."""
    roots = [p for p in search_paths() if os.path.isdir(p)]
    versions = {version for root in roots if os.path.isdir(os.path.join(root, service))
                for version in os.listdir(os.path.join(root, service))
                if _exists(os.path.join(root, service, version, _TYPE))}
    if not versions:
        raise UnknownModel(f"botocore has no model of {service!r}")
    name = os.path.join(service, max(versions), _TYPE)
    model = _first(roots, name)
    for extras_type in _EXTRAS:
        extras = _first(roots, f"{name}.{extras_type}-extras")
        if extras is not None and "merge" in extras:
            _deep_merge(model, extras["merge"])
    return model


def _exists(stem: str) -> bool:
    return any(os.path.isfile(stem + ext) for ext, _ in _OPENERS)


def _first(roots: list[str], name: str) -> Any:
    """The file `name` of the first root that has it, parsed (None if none has)."""
    for root in roots:
        for ext, opener in _OPENERS:
            path = os.path.join(root, name) + ext
            if os.path.isfile(path):
                with opener(path, "rb") as f:
                    return orjson.loads(f.read())
    return None


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    """botocore.utils.deep_merge: `extra`'s keys win, dicts present in both are merged."""
    for key, value in extra.items():
        if isinstance(base.get(key), dict) and isinstance(value, dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value
