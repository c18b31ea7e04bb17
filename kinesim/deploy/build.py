"""`kinesim deploy`'s build step: what `sam build` does before `sam deploy`.

Every function whose code directory has a requirements.txt (Python) or a package.json with
dependencies (Node.js), and every layer with `Metadata: BuildMethod: python3.x / nodejsNN.x`, is
built into a deployment package: its dependencies installed for its runtime and architecture,
its own files on top (a layer's under `python/` or `nodejs/`), as sam build lays out
`.aws-sam/build/<LogicalId>/`. A Node.js function with `Metadata: BuildMethod: esbuild` is bundled
by esbuild with its BuildProperties instead, its Handler and NODE_OPTIONS adjusted as sam build
adjusts them (build_esbuild.py). The template's `CodeUri` / `Code` / `ContentUri` / `Content` is
then pointed at that package (a .zip), before the SAM transform, so everything after — the
AutoPublishAlias version hash, the upload — sees the built package as `sam deploy` does.

Nothing is built for code without dependencies, for code sam build already built (under
`.aws-sam/build/`, what `sam deploy` picks up), or for `Metadata: SkipBuild`.

Builds are cached by content under the user's cache directory ($XDG_CACHE_HOME/kinesim/build,
else ~/.cache/kinesim/build), not next to the template: the user's project stays clean (no
directory to add to .gitignore, a read-only checkout deploys), and projects with the same
requirements share one install. Two levels: the installed dependencies, keyed by the manifest
(and lockfile), runtime, architecture and the interpreter running pip; and the package, keyed by
those and the function's own files. Editing a handler repackages without reinstalling; an
unchanged function reuses its package. Entries unused for a while are removed.

The build runs only in the `kinesim deploy` process (the user's own tools on the user's own
files): a deploy run inside the server (no build session) never builds.
"""
from __future__ import annotations

import contextvars
import copy
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from . import build_esbuild as esbuild
from . import build_steps as steps
from .build_steps import BuildError
from .intrinsics import Resolver, pseudo_parameters
from .lambda_resources import zip_files
from .template import TemplateError

# Bumped when a build's layout changes, so older cache entries are not reused.
BUILD_FORMAT = "1"
PACKAGE_TTL_S = 14 * 86400
DEPENDENCIES_TTL_S = 30 * 86400

_SESSION: contextvars.ContextVar[Builder | None] = contextvars.ContextVar("kinesim_deploy_build", default=None)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kinesim" / "build"


@contextmanager
def session(builder: Builder) -> Iterator[Builder]:
    """Deploys inside this block build their templates' code with `builder`."""
    token = _SESSION.set(builder)
    try:
        yield builder
    finally:
        _SESSION.reset(token)


def built(template: dict[str, Any], template_dir: Path, parameters: dict[str, Any], region: str) -> dict[str, Any]:
    """`template` with its buildable code paths pointed at built packages (itself, untouched,
    outside a build session)."""
    builder = _SESSION.get()
    return template if builder is None else builder.build_template(template, template_dir, parameters, region)


@dataclass
class Unit:
    """One thing to build: a function's code or a layer's content."""
    logical_id: str
    prop: str  # the property pointed at the package: CodeUri, Code, ContentUri, Content
    uri: str
    source: Path
    runtime: str
    architecture: str
    subfolder: str  # "" for a function; python / nodejs for a layer, as sam build lays it out
    use_npm_ci: bool = False  # Metadata: BuildProperties: UseNpmCi
    esbuild: bool = False  # Metadata: BuildMethod: esbuild
    build_properties: dict[str, Any] = field(default_factory=dict)  # esbuild's, Sourcemap from NODE_OPTIONS too
    handler: Any = None  # the Handler in force (the function's, else Globals')
    node_options: Any = None  # the NODE_OPTIONS in force


class Builder:
    def __init__(self, cache_dir: Path | None = None, write: Callable[[str], Any] | None = None):
        self.cache_dir = cache_dir or default_cache_dir()
        self.write = write or _stdout

    def build_template(self, template: dict[str, Any], template_dir: Path, parameters: dict[str, Any],
                       region: str) -> dict[str, Any]:
        resources = template.get("Resources")
        if not isinstance(resources, dict):
            return template
        resolver = Resolver(template, parameters, pseudo_parameters(region, "000000000000", "stack", "pending"))
        units = [u for lid, r in resources.items() if (u := _unit(lid, r, template, resolver, template_dir))]
        if not units:
            return template
        template = copy.deepcopy(template)
        for unit in units:
            package = self.build(unit, template_dir)
            resource = template["Resources"][unit.logical_id]
            resource.setdefault("Properties", {})[unit.prop] = str(package)
            if unit.esbuild:
                with zipfile.ZipFile(package) as archive:
                    names = set(archive.namelist())
                esbuild.update_resource(resource, unit.handler, unit.build_properties, unit.node_options, names)
        return template

    def build(self, unit: Unit, template_dir: Path) -> Path:
        """The unit's package (.zip in the cache), built unless an identical one is cached."""
        started = time.monotonic()
        where = _shown(unit.source, template_dir)
        self.write(f"Building {unit.prop} {where} of {unit.logical_id} for {unit.runtime} ({unit.architecture})"
                   f"{' with esbuild' if unit.esbuild else ''} ... ")
        try:
            package, how = self._bundle(unit, template_dir) if unit.esbuild else self._package(unit)
        except BuildError as err:
            self.write("failed\n")
            raise BuildError(f"building {unit.prop} {where} of {unit.logical_id} ({unit.runtime}) failed, so "
                             f"nothing was deployed: {err}\nFix it and deploy again, or deploy the directory as it "
                             "is with --no-build.") from None
        self.write(f"{how}\n" if how == "cached" else f"{how} in {time.monotonic() - started:.1f} s\n")
        self._prune()
        return package

    def _package(self, unit: Unit) -> tuple[Path, str]:
        kind = steps.language(unit.runtime)
        excluded = steps.PYTHON_EXCLUDED if kind == "python" else steps.NODE_EXCLUDED
        dependencies_key = self._dependencies_key(unit, kind)
        package_key = _digest([dependencies_key, unit.subfolder, *_tree_digest(unit.source, excluded)])
        package = self.cache_dir / "packages" / f"{package_key}.zip"
        if package.is_file():
            os.utime(package)
            return package, "cached"
        dependencies = self.cache_dir / "dependencies" / dependencies_key
        with tempfile.TemporaryDirectory(prefix="kinesim-build-") as scratch:
            if kind == "python":
                reused = dependencies.is_dir()
                if not reused:
                    manifest = steps.requirements(unit.source)
                    assert manifest is not None
                    self._fill(dependencies, lambda target: steps.pip_install(manifest, target, unit.runtime,
                                                                              unit.architecture))
                own = list(steps.walk(unit.source, excluded))
                installed = list(steps.walk(dependencies, ()))
            else:
                document = steps.package_json(unit.source) or {}
                unpacked = steps.npm_unpack(unit.source, document, Path(scratch))
                reused = dependencies.is_dir()
                if not reused:
                    self._fill(dependencies, lambda target: shutil.move(steps.npm_install(unpacked, unit.use_npm_ci),
                                                                         target))
                own = [(rel, path) for rel, path in steps.walk(unpacked, excluded) if rel != ".npmrc"]
                installed = [(f"node_modules/{rel}", path) for rel, path in steps.walk(dependencies, ())]
            os.utime(dependencies)
            # The function's own files over its dependencies, as sam build copies them last.
            files = dict(installed)
            files.update(own)
            prefix = f"{unit.subfolder}/" if unit.subfolder else ""
            self._write_atomically(package, zip_files((prefix + rel, path) for rel, path in sorted(files.items())))
        return package, "dependencies cached, packaged" if reused else "installed"

    def _bundle(self, unit: Unit, template_dir: Path) -> tuple[Path, str]:
        """An esbuild function's package: its dependencies installed (cached as any Node.js
        function's), its entry points bundled, esbuild's output zipped."""
        manifest = esbuild.manifest_of(unit.source)
        dependencies_key = self._dependencies_key(unit, "nodejs") if manifest is not None else "-"
        package_key = _digest([BUILD_FORMAT, "esbuild", dependencies_key,
                               json.dumps(unit.build_properties, sort_keys=True, default=str), json.dumps(unit.handler),
                               esbuild.identity(manifest, unit.source, template_dir, unit.use_npm_ci),
                               *_tree_digest(unit.source, steps.NODE_EXCLUDED)])
        package = self.cache_dir / "packages" / f"{package_key}.zip"
        if package.is_file():
            os.utime(package)
            return package, "cached"
        done = []
        with tempfile.TemporaryDirectory(prefix="kinesim-build-") as scratch:
            workdir, outdir = Path(scratch) / "source", Path(scratch) / "package"
            workdir.mkdir()
            esbuild.copy_source(unit.source, workdir)
            args = esbuild.arguments(unit.build_properties, unit.handler, workdir, str(outdir), manifest)
            if manifest is not None:
                dependencies = self.cache_dir / "dependencies" / dependencies_key
                if dependencies.is_dir():
                    done.append("dependencies cached")
                else:
                    self._fill(dependencies, lambda target: shutil.move(steps.npm_install(workdir, unit.use_npm_ci),
                                                                         target))
                    done.append("installed")
                os.utime(dependencies)
                # Linked, not symlinked: esbuild names modules by their real path, in the bundle
                # and its source map, which must say node_modules/... as sam build's do.
                shutil.copytree(dependencies, workdir / "node_modules", symlinks=True, copy_function=_link_or_copy)
            binary = esbuild.binary(workdir, unit.source, template_dir, self.cache_dir.parent)
            esbuild.bundle(binary, args, workdir)
            files = sorted(steps.walk(outdir, ())) if outdir.is_dir() else []
            self._write_atomically(package, zip_files(files))
        return package, ", ".join([*done, "bundled"])

    def _dependencies_key(self, unit: Unit, kind: str | None) -> str:
        parts = [BUILD_FORMAT, kind or "", unit.runtime, unit.architecture, "%d.%d" % sys.version_info[:2],
                 str(unit.use_npm_ci)] + (["esbuild"] if unit.esbuild else [])
        if kind == "python":
            manifest = steps.requirements(unit.source)
            assert manifest is not None
            parts.append(manifest.read_bytes().hex())
            if steps.refers_to_local_files(manifest):  # what it installs is in the source directory too
                parts += _tree_digest(unit.source, steps.PYTHON_EXCLUDED)
        else:
            for name in ("package.json", *steps.NPM_FILES):
                file = unit.source / name
                parts.append(file.read_bytes().hex() if file.is_file() else "-")
        return _digest(parts)

    def _fill(self, directory: Path, make: Callable[[Path], Any]) -> None:
        """Make a cache directory whole or not at all: built beside it, renamed into place."""
        directory.parent.mkdir(parents=True, exist_ok=True)
        partial = directory.parent / f".partial-{uuid.uuid4().hex}"
        try:
            make(partial)
            partial.mkdir(exist_ok=True)  # pip makes no directory when there was nothing to install
            try:
                os.rename(partial, directory)
            except OSError:
                if not directory.is_dir():  # another deploy's rename won the race: theirs is as good
                    raise
        finally:
            shutil.rmtree(partial, ignore_errors=True)

    def _write_atomically(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.parent / f".partial-{uuid.uuid4().hex}"
        partial.write_bytes(data)
        os.replace(partial, path)

    def _prune(self) -> None:
        now = time.time()
        for folder, ttl in (("packages", PACKAGE_TTL_S), ("dependencies", DEPENDENCIES_TTL_S)):
            for entry in (self.cache_dir / folder).glob("*"):
                try:
                    if now - entry.stat().st_mtime > ttl:
                        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
                except OSError:
                    continue  # in use by another deploy, or gone already


# What the template asks to build


_FUNCTIONS = {"AWS::Serverless::Function": "CodeUri", "AWS::Lambda::Function": "Code"}
_LAYERS = {"AWS::Serverless::LayerVersion": "ContentUri", "AWS::Lambda::LayerVersion": "Content"}


def _unit(lid: str, resource: Any, template: dict[str, Any], resolver: Resolver, template_dir: Path) -> Unit | None:
    if not isinstance(resource, dict) or resource.get("Type") not in {**_FUNCTIONS, **_LAYERS}:
        return None
    type_name = resource["Type"]
    properties = resource.get("Properties") or {}
    metadata = resource.get("Metadata") if isinstance(resource.get("Metadata"), dict) else {}
    if not isinstance(properties, dict) or metadata.get("SkipBuild"):
        return None
    build_method = metadata.get("BuildMethod")
    if type_name in _FUNCTIONS:
        prop = _FUNCTIONS[type_name]
        defaults = ((template.get("Globals") or {}).get("Function") or {}) if type_name.startswith("AWS::Serverless") \
            else {}
        value = lambda name: properties[name] if name in properties else defaults.get(name)  # noqa: E731
        if value("PackageType") == "Image" or "InlineCode" in properties:
            return None
        uri, runtime = value(prop), _resolved(value("Runtime"), resolver)
        architectures = _resolved(value("Architectures"), resolver)
        architecture = architectures[0] if isinstance(architectures, list) and architectures else "x86_64"
        subfolder = ""
        handler = _resolved(value("Handler"), resolver)
        node_options = _resolved(_node_options(properties, defaults), resolver)
    else:
        prop = _LAYERS[type_name]
        if build_method is None:
            return None  # sam build copies a layer without BuildMethod as it is
        uri, runtime = properties.get(prop), build_method
        architecture = str(metadata.get("BuildArchitecture") or "x86_64")
        subfolder = steps.language(str(build_method)) or ""
        handler = node_options = None
    if not isinstance(uri, str) or uri.startswith("s3://"):
        return None
    source = (template_dir / uri).resolve()
    if not source.is_dir() or _built_by_sam(source):
        return None
    if not isinstance(runtime, str) or steps.language(runtime) is None:
        return None  # not a runtime kinesim builds (or runs): the checks after the transform say so
    bundled = build_method == "esbuild" and type_name in _FUNCTIONS
    if bundled and steps.language(runtime) != "nodejs":
        raise BuildError(f"resource {lid}: Metadata BuildMethod esbuild bundles Node.js functions, and its Runtime is "
                         f"{runtime}")
    needs_build = bundled or (steps.requirements(source) if steps.language(runtime) == "python"
                              else steps.package_json(source))
    if not needs_build:
        return None
    if build_method is not None and build_method != runtime and not bundled:
        raise BuildError(f"resource {lid}: Metadata BuildMethod {build_method} is not one kinesim deploy builds (it "
                         "builds Python functions with pip and Node.js functions with npm, as sam build does without "
                         "a BuildMethod, and bundles Node.js functions with BuildMethod esbuild): run `sam build` and "
                         "deploy .aws-sam/build/template.yaml, or deploy the directory as it is with --no-build")
    properties_of_build = metadata.get("BuildProperties") if isinstance(metadata.get("BuildProperties"), dict) else {}
    if bundled:
        properties_of_build = esbuild.with_source_maps_from_environment(properties_of_build, node_options)
    return Unit(lid, prop, uri, source, runtime, str(architecture), subfolder,
                use_npm_ci=bool(properties_of_build.get("UseNpmCi")), esbuild=bundled,
                build_properties=dict(properties_of_build) if bundled else {}, handler=handler,
                node_options=node_options)


def _node_options(properties: dict[str, Any], defaults: dict[str, Any]) -> Any:
    """The function's NODE_OPTIONS: its own, else Globals' (SAM merges the Variables maps)."""
    for environment in (properties.get("Environment"), defaults.get("Environment")):
        variables = environment.get("Variables") if isinstance(environment, dict) else None
        if isinstance(variables, dict) and "NODE_OPTIONS" in variables:
            return variables["NODE_OPTIONS"]
    return None


def _resolved(value: Any, resolver: Resolver) -> Any:
    try:
        return resolver.resolve(value)
    except TemplateError:
        return None  # refers to a resource: not something to build by


def _built_by_sam(path: Path) -> bool:
    """A directory sam build wrote (`.aws-sam/build/<LogicalId>`): deployed as it is, as `sam deploy`
    uploads it."""
    parts = path.parts
    return any(a == ".aws-sam" and b == "build" for a, b in zip(parts, parts[1:]))


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(source, target)


def _tree_digest(root: Path, excluded: tuple[str, ...]) -> list[str]:
    """One digest per file (name, executable bit, bytes) of the tree, in order."""
    out = []
    for relative, path in steps.walk(root, excluded):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        out.append(f"{relative}\0{os.access(path, os.X_OK):d}\0{digest}")
    return out


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _shown(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base.resolve()).as_posix().rstrip("/") + "/"
    except ValueError:
        return str(path) + "/"


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
