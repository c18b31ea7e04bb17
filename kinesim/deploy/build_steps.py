"""How one function's (or layer's) package is built, as `sam build`'s workflows build it
(aws-lambda-builders: python_pip, nodejs_npm): the dependencies its manifest names, installed
with the machine's own pip or npm, and the function's own files laid on top.

A build is split in two so that editing a handler does not reinstall its dependencies: the
dependencies (keyed by the manifest, runtime and architecture) and the package (the dependencies
plus the function's files). build.py caches both; this module only runs the tools.
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Iterator

from .template import DeployError

# What sam build leaves out of a Python function's package (aws-lambda-builders,
# workflows/python_pip/workflow.py EXCLUDED_FILES), matched against every file and directory name.
PYTHON_EXCLUDED = (".aws-sam", ".chalice", ".git", ".gitignore", "*.pyc", "__pycache__", "*.so", ".Python",
                   "*.egg-info", "*.egg", "pip-log.txt", "pip-delete-this-directory.txt", "htmlcov", ".tox", ".nox",
                   ".coverage", ".cache", ".pytest_cache", ".python-version", ".mypy_cache", ".dmypy.json", ".pyre",
                   ".env", ".venv", "venv", "venv.bak", "env.bak", "ENV", "env", ".vscode", ".idea")
# nodejs_npm's EXCLUDED_FILES; node_modules never comes from the source: `npm pack` leaves it out
# and the build installs the production dependencies afresh.
NODE_EXCLUDED = (".aws-sam", ".git", "node_modules")
# The files npm reads besides package.json; sam build copies them next to the packed package.
NPM_FILES = ("package-lock.json", "npm-shrinkwrap.json", ".npmrc")

# glibc of the Lambda runtime by Python version: Amazon Linux 2 (2.26) up to python3.11,
# Amazon Linux 2023 (2.34) from python3.12 (aws-lambda-builders, python_pip/packager.py
# _RUNTIME_GLIBC). A manylinux_2_X wheel runs where glibc >= 2.X (PEP 600).
_GLIBC_MINOR = {(3, 8): 26, (3, 9): 26, (3, 10): 26, (3, 11): 26}
_AL2023_GLIBC_MINOR = 34
OUTPUT_TAIL_LINES = 40


class BuildError(DeployError):
    """A build that failed: the message says what ran, what it said, and what to do."""


def language(runtime: str) -> str | None:
    if re.fullmatch(r"python3\.\d+", runtime):
        return "python"
    if re.fullmatch(r"nodejs\d+\.x", runtime):
        return "nodejs"
    return None


def walk(root: Path, excluded: tuple[str, ...]) -> Iterator[tuple[str, Path]]:
    """(path relative to `root` in posix form, path) of every file under `root`, sorted, with
    the names matching `excluded` left out at every level (as shutil.ignore_patterns does)."""
    def skip(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in excluded)

    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not skip(d))
        for name in sorted(files):
            path = Path(dirpath) / name
            if not skip(name) and path.is_file():  # a dangling link is no file
                yield path.relative_to(root).as_posix(), path


# Python


def requirements(source: Path) -> Path | None:
    """The function's requirements.txt when it names anything to install."""
    manifest = source / "requirements.txt"
    if not manifest.is_file():
        return None
    lines = (line.split("#", 1)[0].strip() for line in manifest.read_text(errors="replace").splitlines())
    return manifest if any(lines) else None


def refers_to_local_files(manifest: Path) -> bool:
    """Whether requirements.txt installs from paths (`./lib`, `-e .`, `file:`, `-r other.txt`):
    then what it installs depends on more files than the manifest."""
    for line in manifest.read_text(errors="replace").splitlines():
        line = line.split(" #", 1)[0].strip()
        if re.match(r"(-e|--editable|-r|--requirement|-c|--constraint)\b|\.|/|file:", line) or " @ file:" in line:
            return True
    return False


def python_version(runtime: str) -> tuple[int, int]:
    major, minor = runtime.removeprefix("python").split(".")
    return int(major), int(minor)


def lambda_platforms(runtime: str, architecture: str) -> list[str]:
    """The wheel platform tags a function of this runtime and architecture runs with on AWS."""
    machine = "aarch64" if architecture == "arm64" else "x86_64"
    glibc = _GLIBC_MINOR.get(python_version(runtime), _AL2023_GLIBC_MINOR)
    # manylinux2014 also makes pip accept manylinux2010 and manylinux1 wheels.
    return [f"manylinux2014_{machine}"] + [f"manylinux_2_{minor}_{machine}" for minor in range(17, glibc + 1)]


def pip_install(manifest: Path, target: Path, runtime: str, architecture: str) -> None:
    """`pip install -r requirements.txt --target TARGET` for the runtime's Python. With the
    interpreter running kinesim of that version, a plain install. Otherwise wheels for the
    runtime's version and Lambda's platform, as sam build resolves them (pip cannot build a
    source distribution for another Python)."""
    version = python_version(runtime)
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
               "--no-warn-script-location", "--progress-bar", "off", "--no-compile", "--target", str(target),
               "-r", str(manifest)]
    cross = version != sys.version_info[:2]
    if cross:
        command += ["--python-version", "%d.%d" % version, "--implementation", "cp", "--abi", "cp%d%d" % version,
                    "--only-binary=:all:"]
        for platform in lambda_platforms(runtime, architecture):
            command += ["--platform", platform]
    result = _pip(command, manifest.parent)
    missing = r"No matching distribution|Could not find a version"
    if cross and result.returncode != 0 and re.search(missing, result.stdout + result.stderr):
        # A package published only as a source distribution: built into a wheel by this machine's
        # Python, which is the runtime's when the package is pure Python (sam build's packager
        # does the same; a compiled one stays unusable and is reported below).
        with tempfile.TemporaryDirectory(prefix="kinesim-wheels-") as wheels:
            built = _pip([sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--no-input",
                          "--progress-bar", "off", "--wheel-dir", wheels, "-r", str(manifest)], manifest.parent)
            if built.returncode == 0:
                shutil.rmtree(target, ignore_errors=True)
                result = _pip([*command, "--find-links", wheels], manifest.parent)
    if result.returncode == 0:
        return
    hint = ""
    if cross and re.search(missing, result.stdout + result.stderr):
        hint = ("\nIf the package exists, it may have no wheel for Python %d.%d on Lambda's platform (manylinux, %s): "
                "%s packages are installed from such wheels only, as sam build resolves them (this machine's pip "
                "runs on Python %d.%d and cannot build a source distribution for another Python); pin a version "
                "that ships one." % (*version, "arm64" if architecture == "arm64" else "x86_64", runtime,
                                     *sys.version_info[:2]))
    raise BuildError(f"`pip install -r requirements.txt` exited with {result.returncode}:\n"
                     f"{output_tail(result.stdout + result.stderr)}{hint}")


def _pip(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, errors="replace")


# Node.js


def package_json(source: Path) -> dict | None:
    """The function's package.json when it lists production dependencies."""
    manifest = source / "package.json"
    if not manifest.is_file():
        return None
    try:
        document = json.loads(manifest.read_text())
    except ValueError as err:
        raise BuildError(f"{manifest} is not valid JSON ({err})") from None
    if not isinstance(document, dict):
        raise BuildError(f"{manifest} is not a JSON object")
    wanted = [document.get(k) for k in ("dependencies", "optionalDependencies")]
    return document if any(isinstance(d, dict) and d for d in wanted) else None


def npm_unpack(source: Path, document: dict, scratch: Path) -> Path:
    """The function's files as `npm pack` selects them (its `files`, .npmignore; never
    node_modules), unpacked into `scratch`, with the lockfile and .npmrc beside them: what
    sam build's NpmPack and CopyNpmrcAndLockfile actions make. npm refuses to pack a
    package.json without name and version; such a directory is copied instead."""
    package = scratch / "package"
    if document.get("name") and document.get("version"):
        output = _npm(["pack", "-q", f"file:{source}"], scratch, "npm pack")
        tarball = scratch / output.strip().splitlines()[-1].strip()
        with tarfile.open(tarball) as archive:
            archive.extractall(scratch, filter="data")
        tarball.unlink()
    else:
        for relative, path in walk(source, NODE_EXCLUDED):
            (package / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, package / relative)
    for name in NPM_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, package / name)
    return package


def npm_install(package: Path, use_npm_ci: bool = False) -> Path:
    """Production dependencies installed into `package`/node_modules, as nodejs_npm's NpmInstall
    action runs npm (its --unsafe-perm is a no-op since npm 7); returns that directory. With
    `Metadata: BuildProperties: UseNpmCi` and a lockfile, `npm ci` as its NpmCI action runs it
    (which, as there, installs devDependencies too)."""
    if use_npm_ci and any((package / name).is_file() for name in ("package-lock.json", "npm-shrinkwrap.json")):
        _npm(["ci"], package, "npm ci")
    else:
        _npm(["install", "-q", "--no-audit", "--no-fund", "--no-save", "--omit=dev"], package,
             "npm install --omit=dev")
    modules = package / "node_modules"
    (modules / ".package-lock.json").unlink(missing_ok=True)  # npm's own bookkeeping, left out by sam build
    modules.mkdir(exist_ok=True)
    return modules


def _npm(arguments: list[str], cwd: Path, what: str) -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise BuildError("npm is not on the PATH: install Node.js with npm to install package.json dependencies")
    result = subprocess.run([npm, *arguments], cwd=cwd, capture_output=True, text=True, errors="replace",
                            env={**os.environ, "NO_UPDATE_NOTIFIER": "1"})
    if result.returncode != 0:
        raise BuildError(f"`{what}` exited with {result.returncode}:\n{output_tail(result.stdout + result.stderr)}")
    return result.stdout


def output_tail(output: str) -> str:
    lines = [line for line in output.rstrip().splitlines() if line.strip()]
    shown = lines[-OUTPUT_TAIL_LINES:]
    skipped = f"  ... ({len(lines) - len(shown)} earlier lines)\n" if len(lines) > len(shown) else ""
    return skipped + "\n".join(f"  {line}" for line in shown)
