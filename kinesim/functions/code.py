"""A function's code on disk: deployment packages (.zip) unpacked once per content, or a local
directory run in place ("hot reload", LocalStack's convention: `Code.S3Bucket="hot-reload"`,
`Code.S3Key=<absolute directory>`).

Layout under the code root: `<FunctionName>/<hex sha256 of the zip>/` (the unpacked files) next to
`<FunctionName>/<hex sha256>.zip` (the package as uploaded, served back by GetFunction's
`Code.Location`). Unpacking goes to a temporary sibling first and is renamed into place, so a
half-written directory is never taken for code.

AWS's checks and texts: a package that is not a zip is "Could not unzip uploaded file. Please
check your file, then try to upload again."; the unzipped size must stay under 262144000 bytes,
checked on the archive's directory before anything is written (and bounded while writing, since
the directory may lie). Entries that would land outside the directory (absolute paths, `..`,
symlinks leading out, alone or through other links), and names the file system cannot hold, are
refused the same way: AWS unpacks into a sandbox, we must not write outside ours (see `_plan`).
"""
from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import io
import os
import shutil
import stat
import tempfile
import zipfile
import zlib
from dataclasses import dataclass

from .errors import invalid_parameter

MAX_UNZIPPED_BYTES = 262_144_000
HOT_RELOAD_BUCKET = "hot-reload"
# What LocalStack answers for a hot-reloaded function's CodeSha256: there is no package to hash.
HOT_RELOAD_SHA = "hot-reloading-hash-not-available"

_NOT_A_ZIP = "Could not unzip uploaded file. Please check your file, then try to upload again."
_COPY_CHUNK = 1 << 20


@dataclass(frozen=True)
class StoredCode:
    """Where a function's code lives and what the API reports about it."""
    code_dir: str        # absolute directory the handler is imported from
    sha256: str          # CodeSha256: base64 of the package's SHA-256
    size: int            # CodeSize: bytes of the package
    hot_reload: bool = False
    package_id: str = ""  # hex SHA-256: names the unpacked directory and the kept .zip

    def internal_keys(self) -> dict:
        """What a function document keeps about its code besides the API's fields."""
        return {"CodeDir": self.code_dir, "HotReload": self.hot_reload, "PackageId": self.package_id}


class CodeStore:
    def __init__(self, root: str):
        self.root = os.path.abspath(root)

    # packages

    def check_zip(self, package: bytes) -> StoredCode:
        """What storing a package would report, without storing it (UpdateFunctionCode's DryRun)."""
        _plan(*_open_zip(package))
        digest = hashlib.sha256(package)
        return StoredCode(code_dir="", sha256=base64.b64encode(digest.digest()).decode(), size=len(package),
                          package_id=digest.hexdigest())

    def store_zip(self, function_name: str, package: bytes) -> StoredCode:
        """Unpack a deployment package for a function (once per distinct content)."""
        archive, entries = _open_zip(package)
        plan = _plan(archive, entries)
        digest = hashlib.sha256(package)
        package_id = digest.hexdigest()
        sha = base64.b64encode(digest.digest()).decode()
        home = self._function_dir(function_name)
        target = os.path.join(home, package_id)
        if not os.path.isdir(target):
            os.makedirs(home, exist_ok=True)
            staging = tempfile.mkdtemp(prefix=".unpack-", dir=home)
            try:
                _extract(archive, plan, staging)
                _write_package(home, package, target + ".zip")
                try:
                    os.rename(staging, target)
                except OSError:  # unpacked meanwhile by a concurrent request: keep that one
                    shutil.rmtree(staging, ignore_errors=True)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        return StoredCode(code_dir=target, sha256=sha, size=len(package), package_id=package_id)

    def hot_reload(self, directory: str) -> StoredCode:
        """Code run in place from a local directory."""
        if not os.path.isabs(directory):
            raise invalid_parameter(
                f"When using hot reloading, the archive key has to be an absolute path! Your archive key: {directory}")
        if not os.path.isdir(directory):
            raise invalid_parameter(f"Hot-reload code directory {directory} does not exist or is not a directory.")
        return StoredCode(code_dir=directory, sha256=HOT_RELOAD_SHA, size=0, hot_reload=True)

    def restore(self, function_name: str, doc: dict) -> str | None:
        """The code directory a function document refers to (recomputed: the data directory may
        have moved since), None if its package is no longer on disk."""
        if doc.get("HotReload"):
            return doc.get("CodeDir")
        package_id = doc.get("PackageId", "")
        target = os.path.join(self._function_dir(function_name), package_id)
        return target if package_id and os.path.isdir(target) else None

    def package_path(self, function_name: str, package_id: str) -> str | None:
        path = os.path.join(self._function_dir(function_name), package_id + ".zip")
        return path if package_id and os.path.isfile(path) else None

    # clean-up

    def prune(self, function_name: str, keep: set[str]) -> None:
        """Remove a function's unpacked packages other than `keep` (package ids)."""
        home = self._function_dir(function_name)
        try:
            names = os.listdir(home)
        except FileNotFoundError:
            return
        for name in names:
            package_id = name[:-4] if name.endswith(".zip") else name
            if package_id in keep:
                continue
            path = os.path.join(home, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except OSError:
                    pass

    def remove(self, function_name: str) -> None:
        shutil.rmtree(self._function_dir(function_name), ignore_errors=True)

    def function_names(self) -> list[str]:
        try:
            return [n for n in os.listdir(self.root) if os.path.isdir(os.path.join(self.root, n))]
        except FileNotFoundError:
            return []

    def _function_dir(self, function_name: str) -> str:
        # Function names are [a-zA-Z0-9-_.]+ (the model's pattern, checked before we get here).
        return os.path.join(self.root, function_name)


def _write_package(home: str, package: bytes, path: str) -> None:
    """Keep the package as uploaded, written beside the unpacked tree rather than inside it, where
    an entry of the same name could be waiting."""
    fd, tmp = tempfile.mkstemp(prefix=".package-", suffix=".zip", dir=home)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(package)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _open_zip(package: bytes) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(package))
        entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise invalid_parameter(_NOT_A_ZIP) from None
    if sum(e.file_size for e in entries) >= MAX_UNZIPPED_BYTES:
        raise invalid_parameter(f"Unzipped size must be smaller than {MAX_UNZIPPED_BYTES} bytes")
    return archive, entries


# Unpacking plans the whole tree first, then writes it without ever following a link.
#
# Entries are checked against the tree they will finally form, never against what is on disk
# mid-way: a link target is resolved in the plan (following the package's own links, as the kernel
# will), and links are created last, once every directory and file is written, so nothing is ever
# written through one. Each path is one thing: a link is never replaced by a later entry of the same
# name nor written under, and a file and a directory never replace each other. The plan is a tree of
# nodes and each link is resolved once, so the work stays linear in the package's size.

# Links nested while resolving one target: Linux's own bound (MAXSYMLINKS) before ELOOP.
_LINK_HOPS = 40
# A longer target than PATH_MAX (less its NUL) could never be followed anyway.
_MAX_LINK_TARGET = 4095
# Deeper trees would break shutil.rmtree (recursive before Python 3.13) wherever code directories
# are removed; no real package nests anywhere near this.
_MAX_DEPTH = 256
# Paths (files, directories, links) one package may create. The plan costs memory per path, and a
# small zip of deep distinct names asks for millions of directories (10 MB: 2.3 million, 600 MB to
# plan); the largest real packages (a 250 MB node_modules) have some tens of thousands.
_MAX_PATHS = 300_000
# Bytes of link targets one package may hold: resolving them costs time per component (60,000
# links of 4 KB in a 7 MB zip: 18 s), and even a pnpm-style node_modules of ten thousand links
# has well under a megabyte.
_MAX_LINK_BYTES = 4 << 20
# Failures that are the host's, not the package's: the answer must not blame the upload.
_HOST_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.ENOMEM, errno.EMFILE,
                          errno.ENFILE, errno.EACCES, errno.EPERM})
_DIR, _FILE, _LINK = "dir", "file", "link"


class _Node:
    """One path of the planned tree."""
    __slots__ = ("name", "parent", "kind", "children", "entry", "target", "resolved")

    def __init__(self, name: str, parent: "_Node | None", kind: str):
        self.name, self.parent, self.kind = name, parent, kind
        self.children: dict[str, _Node] = {}
        self.entry: zipfile.ZipInfo | None = None  # a file's entry
        self.target = ""  # a link's target, as stored
        # Where a link leads, once resolved: a node and how many levels below it the target goes
        # into names the package does not have.
        self.resolved: tuple[_Node, int] | None = None

    def walk(self, path: str):
        """(node, its path under `path`) for every node below this one, each directory before its
        contents; iterative, as a tree may be deeper than Python's recursion limit allows."""
        stack = [(child, f"{path}/{child.name}") for child in reversed(self.children.values())]
        while stack:
            node, node_path = stack.pop()
            yield node, node_path
            stack.extend((child, f"{node_path}/{child.name}") for child in reversed(node.children.values()))


class _Tree:
    """The planned tree: its root, its links, and how many paths it has."""

    def __init__(self):
        self.root = _Node("", None, _DIR)
        self.links: list[_Node] = []
        self.size = 0
        self.link_bytes = 0

    def add(self, parts: list[str], kind: str) -> _Node:
        node = self.root
        for part in parts[:-1]:
            node = self._child(node, part, _DIR)
        return self._child(node, parts[-1], kind)

    def add_link(self, parts: list[str], target: str) -> None:
        self.link_bytes += len(target)
        if self.link_bytes > _MAX_LINK_BYTES:
            raise invalid_parameter(_NOT_A_ZIP)
        self.add(parts, _LINK).target = target

    def _child(self, parent: _Node, name: str, kind: str) -> _Node:
        node = parent.children.get(name)
        if node is None:
            self.size += 1
            if self.size > _MAX_PATHS:
                raise invalid_parameter(_NOT_A_ZIP)
            node = parent.children[name] = _Node(name, parent, kind)
            if kind == _LINK:
                self.links.append(node)
        # The same directory twice is harmless, and so is the same file twice (the last one wins,
        # as with `unzip -o`); anything else would make one entry replace or go through another.
        elif node.kind != kind or kind == _LINK:
            raise invalid_parameter(_NOT_A_ZIP)
        return node


@contextlib.contextmanager
def _bad_package_errors():
    """What a damaged, hostile or unwritable package raises, as AWS's answer to a package it cannot
    unzip. NotImplementedError is zipfile's answer to a compression method it lacks, RuntimeError to
    an encrypted entry; an OSError here comes from a name the file system refuses (ENAMETOOLONG,
    ELOOP, ...), ValueError from one Python cannot pass to it."""
    try:
        yield
    except OSError as err:
        if err.errno in _HOST_FAULTS:
            raise
        raise invalid_parameter(_NOT_A_ZIP) from None
    except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError, ValueError):
        raise invalid_parameter(_NOT_A_ZIP) from None


def _plan(archive: zipfile.ZipFile, entries: list[zipfile.ZipInfo]) -> _Node:
    """The tree a package unpacks to (its root), every entry and link checked."""
    tree = _Tree()
    with _bad_package_errors():
        for entry in entries:
            parts, is_dir = _entry_path(entry)
            if not parts and is_dir:
                continue  # the directory itself ("./", "/")
            if not parts:
                raise invalid_parameter(_NOT_A_ZIP)  # a file or link named "." or ""
            if is_dir:
                tree.add(parts, _DIR)
            elif stat.S_ISLNK(entry.external_attr >> 16):
                tree.add_link(parts, _link_target(archive, entry))
            else:
                tree.add(parts, _FILE).entry = entry
    for link in tree.links:
        _resolve(link, 0)
    return tree.root


def _entry_path(entry: zipfile.ZipInfo) -> tuple[list[str], bool]:
    """An entry's path components, and whether it is a directory (its name ends with a separator:
    some Windows tools write backslashes)."""
    # zipfile cuts a name at a NUL byte: the name stored is not one a file system could hold.
    if "\0" in entry.orig_filename:
        raise invalid_parameter(_NOT_A_ZIP)
    name = entry.filename.replace("\\", "/")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if parts and (name.startswith("/") or ".." in parts or ":" in parts[0] or len(parts) > _MAX_DEPTH):
        raise invalid_parameter(_NOT_A_ZIP)
    return parts, name.endswith("/")


def _link_target(archive: zipfile.ZipFile, entry: zipfile.ZipInfo) -> str:
    with archive.open(entry) as src:
        target = src.read(_MAX_LINK_TARGET + 1).decode("utf-8")
    if not target or len(target.encode()) > _MAX_LINK_TARGET or "\0" in target or target.startswith("/"):
        raise invalid_parameter(_NOT_A_ZIP)
    return target


def _resolve(link: _Node, nesting: int) -> tuple[_Node, int]:
    """Where a planned link leads: its target read in the link's directory, through the package's
    other links (the kernel resolves `..` after a link from where the link leads, so must we).
    Refused if that steps out of the tree at any point, or if the links loop."""
    if link.resolved is not None:
        if link.resolved[1] < 0:
            raise invalid_parameter(_NOT_A_ZIP)  # met again while being resolved: a loop
        return link.resolved
    if nesting > _LINK_HOPS:
        raise invalid_parameter(_NOT_A_ZIP)
    link.resolved = (link, -1)  # being resolved
    node, missing = link.parent, 0
    for part in link.target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if missing:
                missing -= 1
            elif node.parent is None:
                raise invalid_parameter(_NOT_A_ZIP)  # out of the code directory
            else:
                node = node.parent
        elif missing or part not in node.children:
            missing += 1  # a name the package lacks: the rest is read lexically
        else:
            node = node.children[part]
            if node.kind == _LINK:
                node, missing = _resolve(node, nesting + 1)
    link.resolved = (node, missing)
    return link.resolved


def _extract(archive: zipfile.ZipFile, plan: _Node, root: str) -> None:
    """Write the planned tree into the empty directory `root`: directories, then files (each one
    created, never opened if it exists, never through a link), then the links."""
    nodes = list(plan.walk(root))
    budget = MAX_UNZIPPED_BYTES
    with _bad_package_errors():
        for node, path in nodes:
            if node.kind == _DIR:
                os.mkdir(path)
        for node, path in nodes:
            if node.kind == _FILE:
                budget -= _write_file(archive, node.entry, path, budget)
        for node, path in nodes:
            if node.kind == _LINK:
                os.symlink(node.target, path)


def _write_file(archive: zipfile.ZipFile, entry: zipfile.ZipInfo, path: str, budget: int) -> int:
    """Write one file, within `budget` bytes (the archive's directory may understate sizes); the
    bytes written."""
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    with os.fdopen(fd, "wb") as dst, archive.open(entry) as src:
        while chunk := src.read(_COPY_CHUNK):
            written += len(chunk)
            if written >= budget:
                raise invalid_parameter(f"Unzipped size must be smaller than {MAX_UNZIPPED_BYTES} bytes")
            dst.write(chunk)
        # Keep execute bits (bundled binaries, bootstrap scripts); always readable by us.
        mode = entry.external_attr >> 16
        if mode & 0o777:
            os.fchmod(dst.fileno(), (mode & 0o755) | 0o600)
    return written
