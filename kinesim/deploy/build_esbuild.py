"""`Metadata: BuildMethod: esbuild`: a Node.js (TypeScript) function bundled as `sam build` bundles it
(aws-lambda-builders, workflows/nodejs_npm_esbuild; samcli/lib/build/app_builder.py
_get_build_options and bundler.py for the template's side).

- The function's directory is copied (without node_modules, .git, .aws-sam) and its package.json's
  production dependencies installed there (`npm install --omit=dev`, or `npm ci` with UseNpmCi
  and a lockfile, devDependencies included); no package.json, nothing installed.
- esbuild bundles the EntryPoints, by default the handler's file (`src/app.handler`: src/app.ts,
  else src/app.js), with `--bundle --platform=node --outdir=PACKAGE`, then `--target=es2020`,
  `--format=cjs` and `--minify` unless BuildProperties set them, then every BuildProperty as an
  esbuild flag: its name in kebab-case (MainFields: `--main-fields=...`), a string as `=value`, true
  as the bare flag (false: nothing), a list as `:item` per item (External: [`@aws-sdk/*`] gives
  `--external:@aws-sdk/*`; Banner and Footer need the list form, `[js=...]`, as esbuild takes
  `--banner:js=...`). Bundle, Platform and Outdir are sam build's own; EntryPoints and UseNpmCi are
  not esbuild's. External naming `./node_modules/*` marks every package.json dependency external.
- The package is esbuild's output alone (app.js, app.js.map): the dependencies are in the bundle,
  the External ones must come from the runtime (the AWS SDK v3) or a layer.
- The template: a Handler whose file is not in the package at its path (`src/app.handler`, bundled
  to app.js) becomes the file's name (`app.handler`); Sourcemap adds `--enable-source-maps` to the
  function's NODE_OPTIONS, and NODE_OPTIONS with it and no Sourcemap turns Sourcemap on.

Which esbuild: sam build runs the one its npm install put in node_modules/.bin (a production
dependency, or any with `npm ci`), else `esbuild` on the PATH, and fails without one. kinesim looks
there too, and in the project's own node_modules (the function's directory or one above it, up to
the template's: `npm install --save-dev esbuild`, which sam build --build-in-source uses); when none
is anywhere, it installs esbuild ESBUILD_VERSION from the npm registry once into its cache
($XDG_CACHE_HOME/kinesim/esbuild/VERSION), so a TypeScript function deploys on a machine with only
Node.js and npm.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from .build_steps import NODE_EXCLUDED, BuildError, output_tail, walk

# The esbuild installed when the project brings none; 0.x as the CDK's NodejsFunction requires
# (tests/browser bundles with the same version).
ESBUILD_VERSION = "0.28.2"
INSTALL_TIMEOUT_S = 600
_PASCAL_TO_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")  # samcli's BUILD_PROPERTIES_PASCAL_TO_SNAKE_CASE_PATTERN
_SET_BY_SAM = ("bundle", "platform", "outdir")  # NON_CONFIGURABLE_VALUES
_NOT_ESBUILDS = ("use_npm_ci", "entry_points")  # ESBUILD_IGNORE_VALUES
_ALL_DEPENDENCIES = "./node_modules/*"
_LAYER_PREFIX = "/opt"
_SOURCE_MAPS = "--enable-source-maps"
_NETWORK_ERRORS = re.compile(r"ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNREFUSED|ECONNRESET|ENETUNREACH|network", re.I)


# The command line


def options(build_properties: dict[str, Any], handler: str | None) -> dict[str, Any]:
    """BuildProperties as sam build hands them to the workflow: PascalCase keys in snake_case, and
    `entry_points` the handler's file when EntryPoints is not given."""
    normalized = {_PASCAL_TO_SNAKE.sub("_", key).lower(): value for key, value in build_properties.items()}
    if handler and not build_properties.get("EntryPoints"):
        normalized["entry_points"] = [handler.split(".")[0]]
    return normalized


def arguments(build_properties: dict[str, Any], handler: str | None, workdir: Path, outdir: str,
              manifest: dict[str, Any] | None) -> list[str]:
    """esbuild's arguments, run in `workdir` (the copied function), as EsbuildCommandBuilder makes
    them: ./node_modules/* externals, the entry points, the fixed and default flags, the properties."""
    config = options(build_properties, handler)
    command: list[str] = []
    external = config.get("external")
    if isinstance(external, (list, str)) and _ALL_DEPENDENCIES in external:
        dependencies = (manifest or {}).get("dependencies")
        command += [f"--external:{name}" for name in (dependencies if isinstance(dependencies, dict) else {})]
        config.pop("external")
    entry_points = config.get("entry_points")
    if entry_points is None:
        raise BuildError("Metadata BuildProperties EntryPoints is not set and there is no Handler to take it from")
    if not isinstance(entry_points, list):
        raise BuildError(f"Metadata BuildProperties EntryPoints must be a list, not {entry_points!r}")
    if not entry_points:
        raise BuildError("Metadata BuildProperties EntryPoints must not be empty")
    command += [_entry_file(str(entry), workdir) for entry in entry_points]
    command += ["--bundle", "--platform=node", f"--outdir={outdir}"]
    command += [flag for key, flag in (("target", "--target=es2020"), ("format", "--format=cjs"),
                                       ("minify", "--minify")) if key not in config]
    for key, value in config.items():
        if key in _SET_BY_SAM or key in _NOT_ESBUILDS:
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            command += [flag] if value else []
        elif isinstance(value, str):
            command.append(f"{flag}={value}")
        elif isinstance(value, list):
            command += [f"{flag}:{item}" for item in value]
        else:
            raise BuildError(f"Metadata BuildProperties: {value!r} of {_pascal(key)} is neither a string, a "
                             "boolean nor a list, the forms esbuild's options are given in")
    return command


def _entry_file(entry: str, workdir: Path) -> str:
    """The entry point with its extension: as given when it has one, else .ts, else .js."""
    if PurePosixPath(entry).suffix:
        if (workdir / entry).is_file():
            return entry
        raise BuildError(f"entry point {entry} does not exist")
    for extension in (".ts", ".js"):
        if (workdir / (entry + extension)).is_file():
            return entry + extension
    raise BuildError(f"entry point {entry} does not exist (neither {entry}.ts nor {entry}.js)")


def _pascal(key: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in key.split("_"))


# The template


def enables_source_maps(node_options: Any) -> bool:
    return isinstance(node_options, str) and _SOURCE_MAPS in node_options.split()


def with_source_maps_from_environment(build_properties: dict[str, Any], node_options: Any) -> dict[str, Any]:
    """NODE_OPTIONS with --enable-source-maps and no Sourcemap: Sourcemap true (an explicit false
    wins)."""
    if build_properties.get("Sourcemap") is None and enables_source_maps(node_options):
        return {**build_properties, "Sourcemap": True}
    return build_properties


def handler_in_package(handler: Any, names: set[str]) -> Any:
    """The Handler to deploy: unchanged when its file is in the package where it says (or in a
    layer, /opt/...), else its last path part (`src/handlers/app.handler` -> `app.handler`, as
    esbuild wrote src/handlers/app.ts to app.js)."""
    if not isinstance(handler, str) or not handler:
        return handler
    path = PurePosixPath(handler)
    file = (path.parent / path.stem).as_posix() + ".js"
    if file.startswith(_LAYER_PREFIX) or file in names:
        return handler
    return path.name


def update_resource(resource: dict[str, Any], handler: Any, build_properties: dict[str, Any],
                    node_options: Any, names: set[str]) -> None:
    """The resource as sam build writes it into .aws-sam/build/template.yaml: `handler` (the one
    in force, Globals' included) and `node_options` (likewise) are what the function would get."""
    properties = resource.setdefault("Properties", {})
    new_handler = handler_in_package(handler, names)
    if new_handler != handler:
        properties["Handler"] = new_handler
    if build_properties.get("Sourcemap") and not enables_source_maps(node_options):
        environment = properties.setdefault("Environment", {})
        variables = environment.setdefault("Variables", {}) if isinstance(environment, dict) else None
        if isinstance(variables, dict):
            existing = variables.setdefault("NODE_OPTIONS", "")
            if isinstance(existing, str):  # sam build leaves an intrinsic alone, and warns
                variables["NODE_OPTIONS"] = " ".join([existing, _SOURCE_MAPS])


# The build


def copy_source(source: Path, workdir: Path) -> None:
    """The function's files without node_modules, .git and .aws-sam (CopySourceAction): the
    lockfile and .npmrc that npm reads among them."""
    for relative, path in walk(source, NODE_EXCLUDED):
        (workdir / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, workdir / relative)


def installs_esbuild(manifest: dict[str, Any] | None, source: Path, use_npm_ci: bool) -> bool:
    """Whether the dependencies install brings esbuild (into node_modules/.bin)."""
    if not manifest:
        return False
    sections = ["dependencies", "optionalDependencies"]
    if use_npm_ci and any((source / name).is_file() for name in ("package-lock.json", "npm-shrinkwrap.json")):
        sections.append("devDependencies")  # npm ci installs them too
    return any(isinstance(manifest.get(s), dict) and "esbuild" in manifest[s] for s in sections)


def _project_or_path(source: Path, project_root: Path) -> str | None:
    """esbuild in the project's node_modules (the function's directory, or one above it up to the
    template's), else on the PATH."""
    directory = source.resolve()
    root = project_root.resolve()
    while True:
        candidate = directory / "node_modules" / ".bin" / "esbuild"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        if directory == root or root not in directory.parents:
            break
        directory = directory.parent
    return shutil.which("esbuild")


def identity(manifest: dict[str, Any] | None, source: Path, project_root: Path, use_npm_ci: bool) -> str:
    """Which esbuild a build will run, for the package's cache key (the dependencies' own is keyed
    by the manifest already)."""
    if installs_esbuild(manifest, source, use_npm_ci):
        return "dependencies"
    found = _project_or_path(source, project_root)
    if found:
        real = os.path.realpath(found)
        return f"{real}:{os.stat(real).st_mtime_ns}"
    return f"kinesim esbuild {ESBUILD_VERSION}"


def binary(workdir: Path, source: Path, project_root: Path, cache_root: Path) -> str:
    """The esbuild to run: the installed dependencies' (node_modules/.bin, as sam build looks first),
    the project's, the PATH's, else kinesim's own, installed on first use."""
    installed = workdir / "node_modules" / ".bin" / "esbuild"
    if installed.is_file() and os.access(installed, os.X_OK):
        return str(installed)
    return _project_or_path(source, project_root) or pinned(cache_root)


def pinned(cache_root: Path) -> str:
    """esbuild ESBUILD_VERSION in `cache_root`/esbuild/VERSION, installed from the npm registry (the
    `esbuild` package brings its binary as @esbuild/<platform>) unless already there."""
    home = cache_root / "esbuild" / ESBUILD_VERSION
    found = home / "node_modules" / ".bin" / "esbuild"
    if found.is_file() and os.access(found, os.X_OK):
        return str(found)
    why = (f"esbuild is needed to bundle a function with Metadata BuildMethod esbuild, and none is in the "
           f"function's dependencies, the project's node_modules or on the PATH (sam build wants it on the "
           f"PATH or as a dependency), so kinesim installs esbuild {ESBUILD_VERSION} from the npm registry into "
           f"{home}")
    advice = ("Install esbuild yourself (`npm install --save-dev esbuild` in the project, or `npm install -g "
              "esbuild`) and deploy again.")
    npm = shutil.which("npm")
    if npm is None:
        raise BuildError(f"{why}; but npm is not on the PATH. {advice}")
    home.parent.mkdir(parents=True, exist_ok=True)
    partial = home.parent / f".partial-{uuid.uuid4().hex}"
    command = [npm, "install", "--prefix", str(partial), "--no-save", "--no-package-lock", "--no-audit",
               "--no-fund", f"esbuild@{ESBUILD_VERSION}"]
    try:
        partial.mkdir()
        try:
            result = subprocess.run(command, capture_output=True, text=True, errors="replace",
                                    timeout=INSTALL_TIMEOUT_S, env={**os.environ, "NO_UPDATE_NOTIFIER": "1"})
        except subprocess.TimeoutExpired:
            raise BuildError(f"{why}; `npm install esbuild@{ESBUILD_VERSION}` did not finish in "
                             f"{INSTALL_TIMEOUT_S} s. {advice}") from None
        output = result.stdout + result.stderr
        installed = partial / "node_modules" / ".bin" / "esbuild"
        if result.returncode != 0 or not installed.is_file():
            unreachable = " (the npm registry is unreachable)" if _NETWORK_ERRORS.search(output) else ""
            raise BuildError(f"{why}; `npm install esbuild@{ESBUILD_VERSION}` failed{unreachable}, exit "
                             f"{result.returncode}:\n{output_tail(output)}\n{advice}")
        try:
            os.rename(partial, home)
        except OSError:
            if not found.is_file():  # another deploy's install won the race: theirs is as good
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return str(found)


def bundle(esbuild: str, args: list[str], workdir: Path) -> None:
    result = subprocess.run([esbuild, *args], cwd=workdir, capture_output=True, text=True, errors="replace",
                            env={**os.environ, "NO_COLOR": "1"})
    if result.returncode != 0:
        raise BuildError(f"esbuild ({esbuild}) exited with {result.returncode}:\n"
                         f"{output_tail(result.stdout + result.stderr)}")


def manifest_of(source: Path) -> dict[str, Any] | None:
    """The function's package.json (any, with or without dependencies), None when it has none."""
    path = source / "package.json"
    if not path.is_file():
        return None
    try:
        document = json.loads(path.read_text())
    except ValueError as err:
        raise BuildError(f"{path} is not valid JSON ({err})") from None
    if not isinstance(document, dict):
        raise BuildError(f"{path} is not a JSON object")
    return document
